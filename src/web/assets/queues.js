/*
 * pgjob web: the queues' page (#/queues): counts, pause and resume, flow
 * limits; and the queue's figures the overview shows too.
 */
import {fmtSecs, fmtTime, h, num, region, showText} from '/dom.js';
import {act, main, operator} from '/core.js';
import {sortedTable} from '/sort.js';

/* A queue's count k: "1,000+" when the server stopped counting
 * (the field is in at_least). */
export function count(q, k) {
	const more = Array.isArray(q.at_least) && q.at_least.includes(k);
	if (Array.isArray(q.estimated) && q.estimated.includes(k))
		return h('span', {title: 'counted among the first 1,000 ' +
			'due jobs: near, not exact'}, '\u2248 ' + num(q[k]));
	return more ? h('span', {title: 'at least: counting stops there'},
		num(q[k]) + '+') : num(q[k]);
}

export function wait(q) {
	const s = fmtSecs(q.oldest_wait_seconds);
	return Array.isArray(q.at_least) && q.at_least.includes(
		'oldest_wait_seconds') && s ? '\u2265 ' + s : s;
}

export function queueLink(q) {
	return h('a', {href: '#/jobs?queue=' + encodeURIComponent(q)},
		showText(q, false));
}

function historyLink(queue) {
	return h('a', {href: '#/history?queue=' + encodeURIComponent(queue) +
		'&range=1h', class: 'muted', title: 'history of ' + queue},
	'history');
}

/* --- queues ----------------------------------------------------- */

/* The keys of pgjob.set_limits(): [key, label, kind]; a rate is
 * "COUNT/PERIOD" text (10/s, 600/min, 100/10s). */
const LIMITS = [
	['global_concurrency', 'Concurrency (cluster)', 'n'],
	['per_key_concurrency', 'Concurrency per key', 'n'],
	['rate', 'Rate (e.g. 10/s)', 'rate'],
	['burst', 'Burst', 'n'],
	['rate_per_key', 'Rate per key (e.g. 1/s)', 'rate'],
	['burst_per_key', 'Burst per key', 'n'],
];

/* A rate as the set_limits text: 10 per 1000 ms is "10/1000ms". */
function rateText(n, ms) {
	if (n === null || n === undefined)
		return '';
	ms = Number(ms);
	if (ms % 3600000 === 0)
		return n + '/' + (ms === 3600000 ? '' : ms / 3600000) + 'h';
	if (ms % 60000 === 0)
		return n + '/' + (ms === 60000 ? '' : ms / 60000) + 'min';
	if (ms % 1000 === 0)
		return n + '/' + (ms === 1000 ? '' : ms / 1000) + 's';
	return n + '/' + ms + 'ms';
}

export function queuesPage(p) {
	const editor = h('div', {id: 'limits-editor'});
	const out = region('queues');
	main.append(h('h1', null, 'Queues'), editor, out);
	p.url = () => '/api/queues';
	p.render = (d) => out.replaceChildren(queuesTable(p, d.queues || [],
		editor));
}

function limitsText(l) {
	if (!l)
		return h('span', {class: 'muted'}, 'none');
	const s = [];
	if (l.global_concurrency !== null && l.global_concurrency !==
		undefined)
		s.push('concurrency ' + l.global_concurrency);
	if (l.per_key_concurrency !== null && l.per_key_concurrency !==
		undefined)
		s.push(l.per_key_concurrency + ' per key');
	if (l.rate !== null && l.rate !== undefined)
		s.push('rate ' + rateText(l.rate, l.rate_period_ms) +
			(l.burst ? ', burst ' + l.burst : ''));
	if (l.rate_per_key !== null && l.rate_per_key !== undefined)
		s.push(rateText(l.rate_per_key, l.rate_per_key_period_ms) +
			' per key' + (l.burst_per_key ? ', burst ' +
			l.burst_per_key : ''));
	if (l.fair)
		s.push('fair');
	if (l.throttled_until)
		s.push('throttled until ' + fmtTime(l.throttled_until));
	return [s.length ? s.join('; ') : 'none', l.source ?
		h('span', {class: 'muted'}, ' (', showText(l.source, false),
			')') : null];
}

/* A count as the queues' order takes it (the number shown, a bound or
 * an estimate alike). */
const n = (k) => (q) => q[k] === null || q[k] === undefined ? null :
	Number(q[k]);

/* The queues' columns: [key, label, what it sorts by]. */
const QUEUE_COLS = [
	['queue', 'queue', (q) => q.queue],
	['available', 'available', n('available')],
	['scheduled', 'scheduled', n('scheduled')],
	['running', 'running', n('running')],
	['waiting', 'waiting', n('waiting')],
	['dead', 'dead', n('dead')],
	['done', 'done/min', n('done_last_minute')],
	['failed', 'failed/min', n('failed_last_minute')],
	['wait', 'oldest waiting', n('oldest_wait_seconds')],
	['limits', 'limits', null],
	['state', 'state', (q) => (q.paused ? 'paused' : 'running') +
		(q.paused_kinds || []).length],
];

function queuesTable(p, queues, editor) {
	const op = operator();
	return sortedTable(p, 'sort', QUEUE_COLS.concat(op ? [['actions',
		'actions', null]] : []), queues, (q) => [h('span', null,
		queueLink(q.queue), ' ', historyLink(q.queue)),
	count(q, 'available'), count(q, 'scheduled'), count(q, 'running'),
	count(q, 'waiting'), count(q, 'dead'), num(q.done_last_minute),
	num(q.failed_last_minute), wait(q),
	limitsText(q.limits), h('div', {class: 'cellacts'},
		q.paused ? h('span', {class: 'badge paused'}, 'paused') :
			h('span', {class: 'muted'}, 'running'),
		(q.paused_kinds || []).map((k) => h('span', {class: 'kind'},
			'kind ', showText(k, false), ' paused', op ?
				h('button', {type: 'button',
					'data-action': 'resume-kind',
					'data-key': 'resume-' + q.queue + '/' + k,
					onclick: () => act('/api/queues/resume', {
						queue: q.queue, kind: k}, () => 'Kind ' +
						k + ' resumed in queue ' + q.queue + '.')},
				'Resume') : null)))].concat(op ? [h('div', {
		class: 'cellacts'}, h('button', {type: 'button',
		'data-action': q.paused ? 'resume' : 'pause',
		'data-queue': q.queue, 'data-key': 'pause-' + q.queue,
		onclick: () => act('/api/queues/' + (q.paused ? 'resume' :
			'pause'), {queue: q.queue}, () => 'Queue ' + q.queue +
			(q.paused ? ' resumed.' : ' paused.'))},
		q.paused ? 'Resume' : 'Pause'),
	h('button', {type: 'button', 'data-action': 'limits',
		'data-key': 'limits-' + q.queue,
		onclick: () => limitsForm(editor, q)}, 'Limits\u2026'))] : []),
	'num queues');
}

/* The limits form: outside the refreshed table, so a refresh leaves
 * it as the user left it. */
function limitsForm(editor, q) {
	const l = q.limits || {};
	const now = {
		global_concurrency: l.global_concurrency,
		per_key_concurrency: l.per_key_concurrency,
		rate: rateText(l.rate, l.rate_period_ms),
		burst: l.burst,
		rate_per_key: rateText(l.rate_per_key, l.rate_per_key_period_ms),
		burst_per_key: l.burst_per_key,
	};
	const inputs = LIMITS.map(([k, label, kind]) => h('div', {
		class: 'field'}, h('label', {for: 'l-' + k}, label),
	h('input', {id: 'l-' + k, name: k, type: kind === 'n' ? 'number' :
		'text', min: kind === 'n' ? '1' : null, step: kind === 'n' ?
		'1' : null, value: now[k] === null || now[k] === undefined ?
		'' : String(now[k])})));
	const fair = h('input', {id: 'l-fair', name: 'fair',
		type: 'checkbox', checked: !!l.fair});
	const reset = h('input', {id: 'l-reset', name: 'reset',
		type: 'checkbox'});
	const form = h('form', {class: 'panel', id: 'limits-form'},
		h('h2', null, 'Limits of queue ', showText(q.queue, false)),
		h('p', {class: 'muted'}, 'An empty field removes that limit.'),
		h('div', {class: 'filters'}, inputs,
			h('div', {class: 'field check'}, fair,
				h('label', {for: 'l-fair'}, 'Fair between keys')),
			h('div', {class: 'field check'}, reset,
				h('label', {for: 'l-reset'},
					'Reset to the configuration'))),
		h('div', {class: 'actions'},
			h('button', {type: 'submit', class: 'primary',
				'data-action': 'save-limits'}, 'Save'),
			h('button', {type: 'button', onclick: () =>
				editor.replaceChildren()}, 'Close')));
	form.addEventListener('submit', (ev) => {
		ev.preventDefault();
		const set = {};
		for (const [k, , kind] of LIMITS) {
			const v = form.elements.namedItem(k).value.trim();
			set[k] = v === '' ? null : kind === 'n' ? Number(v) : v;
		}
		set.fair = fair.checked;
		/* A reset alone: the config's limits, nothing set over them. */
		act('/api/queues/limits', reset.checked ? {queue: q.queue,
			reset: true} : {queue: q.queue, set: set}, () =>
			'Limits of queue ' + q.queue + (reset.checked ?
				' reset to the configuration.' : ' saved.'));
		editor.replaceChildren();
	});
	editor.replaceChildren(form);
	form.elements.namedItem(LIMITS[0][0]).focus();
}
