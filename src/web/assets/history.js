/*
 * pgjob web: the history of a queue or a kind (#/history).
 */
import {fmtMs, fmtSecs, h, num, region, section, short, showText,
	table} from '/dom.js';
import {main} from '/core.js';
import {seriesChart} from '/charts.js';

/* --- history per queue and kind; a job's timeline -------------- */

/* (docs/console.md, "Queues".)  #/history?queue=&kind=&range=:
 * a queue's (or kind's) done, failed and retried per step and its wait
 * and run times at p50/p95/p99, from /api/history; then a table per
 * kind over the range. */
const RANGES = ['1h', '24h', '7d', '30d'];

export function historyPage(p) {
	const queue = p.r.q.get('queue') || '';
	const kind = p.r.q.get('kind') || '';
	const range = RANGES.includes(p.r.q.get('range')) ?
		p.r.q.get('range') : '1h';
	const go = (k, r) => {
		const q = new URLSearchParams();
		if (queue)
			q.set('queue', queue);
		if (k)
			q.set('kind', k);
		q.set('range', r);
		location.hash = '#/history?' + q.toString();
	};
	const pick = h('select', {id: 'h-range', 'data-key': 'h-range',
		'aria-label': 'range', onchange: (ev) => go(kind,
			ev.target.value)}, RANGES.map((r) => h('option', {value: r,
		selected: r === range}, 'last ' + r)));
	const out = region('history');
	main.append(h('h1', null, 'History ', queue ? showText(queue,
		false) : 'of every queue', kind ? ' \u00b7 ' : '',
	kind ? showText(kind, false) : ''), h('p', null, pick,
		kind ? h('button', {type: 'button', class: 'link',
			onclick: () => go('', range)}, ' every kind') : null), out);
	const q = new URLSearchParams({range: range});
	if (queue)
		q.set('queue', queue);
	if (kind)
		q.set('kind', kind);
	p.url = () => '/api/history?' + q.toString();
	p.render = (d) => out.replaceChildren(...historyView(d, go, range));
}

function historyView(d, go, range) {
	const rows = d.series || [];
	const step = Number(d.step_seconds) || 60;
	const per = {60: 'minute', 600: '10 minutes', 3600: 'hour',
		21600: '6 hours'}[step] || fmtSecs(step);
	return [
		section('Ended per ' + per, seriesChart(rows,
			['done', 'failed', 'retried'], (v) => num(v),
			'done, failed and retried attempts per ' + per)),
		section('Wait (from due to start)', seriesChart(rows,
			['wait_p50', 'wait_p95', 'wait_p99'], fmtMs,
			'wait time percentiles')),
		section('Run time', seriesChart(rows,
			['run_p50', 'run_p95', 'run_p99'], fmtMs,
			'run time percentiles')),
		section('Per kind', table(['queue', 'kind', 'done', 'failed',
			'retried', 'wait p50', 'wait p95', 'wait p99', 'run p50',
			'run p95', 'run p99'], (d.kinds || []).map((k) => [
			short(k.queue, 60), h('button', {type: 'button',
				class: 'link', onclick: () => go(k.kind, range)},
			showText(String(k.kind).slice(0, 60), false)),
			num(k.done), num(k.failed), num(k.retried),
			fmtMs(k.wait_p50), fmtMs(k.wait_p95), fmtMs(k.wait_p99),
			fmtMs(k.run_p50), fmtMs(k.run_p95), fmtMs(k.run_p99)]),
		'history-kinds'),
		h('p', {class: 'muted note'}, 'A time is the upper bound ' +
			'of its bucket: at most 41 % above the true one.')),
	];
}
