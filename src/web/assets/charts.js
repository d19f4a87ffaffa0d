/*
 * pgjob web: the line charts, hand-written SVG; their colours are the
 * theme's (app.css: a line's class).
 */
import {fmtTime, h, num, svg} from '/dom.js';
import {main} from '/core.js';

/* The rates (per minute, oldest first) as jobs per second: an SVG of
 * three lines, done, failed and retried. */
export function chart(rates) {
	/* As wide as the page allows (up to 720), so that its labels keep
	 * their size on a phone. */
	const W = Math.max(300, Math.min(720, main.clientWidth - 40));
	const H = 200, L = 44, R = 8, T = 10, B = 24;
	const series = ['done', 'failed', 'retried'];
	let max = 0;
	for (const r of rates)
		for (const k of series)
			max = Math.max(max, Number(r[k] || 0) / 60);
	const top = niceMax(max);
	const n = Math.max(rates.length, 2);
	const x = (i) => L + (W - L - R) * i / (n - 1);
	const y = (v) => T + (H - T - B) * (1 - v / top);
	const g = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'chart',
		role: 'img', 'aria-label': 'done, failed and retried jobs per ' +
		'second over the last hour'});
	for (const f of [0, 0.5, 1]) {
		g.appendChild(svg('line', {x1: L, x2: W - R, y1: y(top * f),
			y2: y(top * f), class: 'grid'}));
		g.appendChild(svg('text', {x: L - 4, y: y(top * f) + 4,
			class: 'axis', 'text-anchor': 'end'}, fmtRate(top * f, top)));
	}
	const first = rates.length ? new Date(rates[0].at) : null;
	[[0, first ? fmtTime(rates[0].at).slice(11, 16) : '-60 min'],
		[n - 1, 'now']].forEach(([i, label], j) =>
		g.appendChild(svg('text', {x: x(i), y: H - 6, class: 'axis',
			'text-anchor': j ? 'end' : 'start'}, label)));
	for (const k of series) {
		const pts = rates.map((r, i) => x(i).toFixed(1) + ',' +
			y(Number(r[k] || 0) / 60).toFixed(1)).join(' ');
		if (rates.length)
			g.appendChild(svg('polyline', {points: pts,
				class: 'line ' + k}));
	}
	/* One invisible column per minute, its figures in a tooltip. */
	rates.forEach((r, i) => g.appendChild(svg('rect', {
		x: x(i) - (W - L - R) / n / 2, y: T, width: (W - L - R) / n,
		height: H - T - B, class: 'hit'}, svg('title', null,
		fmtTime(r.at) + ': done ' + num(r.done) + ', failed ' +
		num(r.failed) + ', retried ' + num(r.retried) +
		' (per minute)'))));
	const legend = h('p', {class: 'legend'}, series.map((k) =>
		h('span', {class: 'key ' + k}, k)), rates.length ? null :
		h('span', {class: 'muted'}, ' (no figures yet)'));
	return h('figure', {class: 'chartbox'}, g, legend);
}

function niceMax(v) {
	if (!(v > 0))
		return 1;
	const e = Math.pow(10, Math.floor(Math.log10(v)));
	for (const m of [1, 2, 2.5, 5, 10])
		if (v <= m * e)
			return m * e;
	return 10 * e;
}

/* v with the decimals that the axis's top needs. */
function fmtRate(v, top) {
	return v.toFixed(top >= 10 ? 0 : top >= 1 ? 1 : 2);
}

/* Lines of keys over rows (oldest first), a tooltip per step; a key
 * is a class of its line (app.css). */
export function seriesChart(rows, keys, fmt, label) {
	const W = Math.max(300, Math.min(720, main.clientWidth - 40));
	const H = 160, L = 64, R = 8, T = 10, B = 24;
	let max = 0;
	for (const r of rows)
		for (const k of keys)
			max = Math.max(max, Number(r[k] || 0));
	const top = niceMax(max);
	const n = Math.max(rows.length, 2);
	const x = (i) => L + (W - L - R) * i / (n - 1);
	const y = (v) => T + (H - T - B) * (1 - v / top);
	const g = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'chart',
		role: 'img', 'aria-label': label});
	for (const f of [0, 0.5, 1]) {
		g.appendChild(svg('line', {x1: L, x2: W - R, y1: y(top * f),
			y2: y(top * f), class: 'grid'}));
		g.appendChild(svg('text', {x: L - 4, y: y(top * f) + 4,
			class: 'axis', 'text-anchor': 'end'}, max ?
			fmt(top * f, true) : ''));
	}
	if (rows.length)
		[[0, fmtTime(rows[0].at).slice(5, 16)], [n - 1, 'now']]
			.forEach(([i, t], j) => g.appendChild(svg('text', {
				x: x(i), y: H - 6, class: 'axis',
				'text-anchor': j ? 'end' : 'start'}, t)));
	for (const k of keys) {
		/* A step without a figure (no attempt) breaks the line. */
		let pts = [];
		const flush = () => {
			if (pts.length)
				g.appendChild(svg('polyline', {points: pts.join(' '),
					class: 'line ' + k.replace(/^(wait|run)_/, '')}));
			pts = [];
		};
		rows.forEach((r, i) => {
			if (r[k] === null || r[k] === undefined)
				return flush();
			pts.push(x(i).toFixed(1) + ',' + y(Number(r[k]))
				.toFixed(1));
		});
		flush();
	}
	rows.forEach((r, i) => g.appendChild(svg('rect', {
		x: x(i) - (W - L - R) / n / 2, y: T, width: (W - L - R) / n,
		height: H - T - B, class: 'hit'}, svg('title', null,
		fmtTime(r.at) + ': ' + keys.map((k) => k.replace(/^(wait|run)_/,
			'') + ' ' + (fmt(r[k]) || '\u2013')).join(', ')))));
	return h('figure', {class: 'chartbox'}, g, h('p', {class: 'legend'},
		keys.map((k) => h('span', {class: 'key ' + k.replace(
			/^(wait|run)_/, '')}, k.replace(/^(wait|run)_/, '')))));
}
