/*
 * pgjob web: the workflows (#/workflows) and one workflow's graph
 * (#/workflow/ID).
 */
import {badge, dl, h, jobLink, num, region, section, short, STATES, svg,
	table, time, visible} from '/dom.js';
import {main, notFound, query} from '/core.js';
import {drawPager} from '/pager.js';
import {at, sortedTable} from '/sort.js';

/* --- workflows -------------------------------------------------- */

/* The workflows' columns: [key, label, what it sorts by]; they sort the
 * page shown (the server pages them newest first). */
const COLS = [
	['id', 'id', (w) => Number(w.id)],
	['name', 'name', (w) => w.name],
	['created', 'created', (w) => at(w.created_at)],
	['steps', 'steps', (w) => Number(w.steps)],
	['ended', 'ended', (w) => Number(w.ended)],
	['failed', 'failed', (w) => Number(w.failed)],
	['finished', 'finished', (w) => at(w.finished_at)],
];

export function workflowsPage(p) {
	p.before = '';
	p.cursors = [];
	const out = region('workflows');
	const pager = h('div', {class: 'pager'});
	main.append(h('h1', null, 'Workflows'), out, pager);
	p.url = () => '/api/workflows' + query({before: p.before});
	p.render = (d) => {
		out.replaceChildren(sortedTable(p, 'sort', COLS,
			d.workflows || [], (w) => [h('a', {href: '#/workflow/' +
				Number(w.id)}, String(w.id)), short(w.name, 80),
			time(w.created_at), num(w.steps), num(w.ended),
			Number(w.failed) ? h('span', {class: 'badge st-dead'},
				num(w.failed)) : '0', time(w.finished_at)], 'num'));
		drawPager(p, d, pager);
	};
}

export function workflowPage(p) {
	const id = Number(p.r.arg);
	if (!Number.isSafeInteger(id) || id <= 0)
		return notFound(p);
	const out = region('workflow');
	main.append(h('h1', null, 'Workflow ' + id), out);
	p.url = () => '/api/workflow/' + id;
	p.render = (d) => {
		const w = d.workflow || {};
		out.replaceChildren(dl([
			['name', short(w.name, 200)],
			['created', time(w.created_at)],
			['finished', time(w.finished_at)],
			['steps', num(w.steps)],
			['jobs', h('a', {href: '#/jobs?workflow=' + id},
				'the steps in the jobs page')]]),
		section('Graph', dag(d.steps || [], d.edges || [])),
		section('Steps', table(['job', 'step', 'kind', 'queue',
			'state', 'attempts', 'last error'], (d.steps || []).map(
			(s) => [jobLink(s.id), short(s.step, 60),
				short(s.kind, 60), short(s.queue, 40), badge(s.state),
				String(s.attempts), short(s.last_error, 120)]))));
	};
}

/*
 * The DAG, by layers: a step's layer is one more than its deepest
 * parent's; layers are columns, left to right; each step a link to its
 * job, coloured by its state.
 */
function dag(steps, edges) {
	if (!steps.length)
		return h('p', {class: 'muted'}, 'No steps.');
	if (steps.length > 400)
		return h('p', {class: 'muted'}, steps.length +
			' steps: too many to draw; the table lists them.');
	const byId = new Map(steps.map((s) => [s.id, s]));
	const parents = new Map(steps.map((s) => [s.id, []]));
	for (const e of edges)
		if (byId.has(e.parent) && parents.has(e.child))
			parents.get(e.child).push(e.parent);
	const layer = new Map();
	const depth = (id, seen) => {
		if (layer.has(id))
			return layer.get(id);
		if (seen.has(id))
			return 0; /* a cycle: cannot happen, draw anyway */
		seen.add(id);
		let d = 0;
		for (const q of parents.get(id))
			d = Math.max(d, depth(q, seen) + 1);
		layer.set(id, d);
		return d;
	};
	const cols = [];
	for (const s of [...steps].sort((a, b) => a.id - b.id)) {
		const d = depth(s.id, new Set());
		(cols[d] = cols[d] || []).push(s);
	}
	const BW = 168, BH = 46, GX = 56, GY = 14, PAD = 8;
	const pos = new Map();
	cols.forEach((c, i) => c.forEach((s, j) => pos.set(s.id, {
		x: PAD + i * (BW + GX), y: PAD + j * (BH + GY)})));
	const W = PAD * 2 + cols.length * (BW + GX) - GX;
	const H = PAD * 2 + Math.max(...cols.map((c) => c.length)) *
		(BH + GY) - GY;
	const g = svg('svg', {class: 'dag', viewBox: '0 0 ' + W + ' ' + H,
		width: W, height: H, role: 'group',
		'aria-label': 'the workflow\'s steps by layer'});
	for (const e of edges) {
		const a = pos.get(e.parent), b = pos.get(e.child);
		if (!a || !b)
			continue;
		const x1 = a.x + BW, y1 = a.y + BH / 2, x2 = b.x,
			y2 = b.y + BH / 2, m = (x1 + x2) / 2;
		g.appendChild(svg('path', {class: 'edge', d: 'M' + x1 + ',' +
			y1 + ' C' + m + ',' + y1 + ' ' + m + ',' + y2 + ' ' + x2 +
			',' + y2}));
	}
	for (const s of steps) {
		const o = pos.get(s.id);
		const st = STATES.includes(s.state) ? s.state : 'other';
		const name = s.step || s.kind || String(s.id);
		g.appendChild(svg('a', {href: '#/job/' + Number(s.id),
			class: 'node st-' + st},
		svg('title', null, name + ': ' + s.state + ' (job ' + s.id +
			')'),
		svg('rect', {x: o.x, y: o.y, width: BW, height: BH, rx: 6}),
		svg('text', {x: o.x + 8, y: o.y + 19, class: 'name'},
			visible(name, 22)),
		svg('text', {x: o.x + 8, y: o.y + 37, class: 'sub'},
			s.state + ' \u00b7 job ' + s.id)));
	}
	return h('div', {class: 'scroll dagbox'}, g);
}
