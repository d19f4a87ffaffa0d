/*
 * pgjob web: the jobs' filter: its form and its terms (/api/jobs).
 */
import {h, STATES} from '/dom.js';
import {hooks, query} from '/core.js';
import {suggesting} from '/suggest.js';

/* What the jobs' filter takes: the states, and two kinds of available
 * jobs (due later; due again after a failed attempt). */
const FILTER_STATES = STATES.concat(['scheduled', 'retrying']);

export const FILTERS = ['state', 'queue', 'kind', 'q', 'from', 'to',
	'limit_key', 'ordering_key', 'workflow'];

/* datetime-local <-> RFC 3339 (the hash and the API hold the latter). */
function toLocalInput(iso) {
	const d = new Date(iso);
	if (!iso || isNaN(d))
		return '';
	const p = (n) => String(n).padStart(2, '0');
	return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' +
		p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes());
}

function fromLocalInput(v) {
	const d = new Date(v);
	return v && !isNaN(d) ? d.toISOString() : '';
}

/* The filter's terms that are set (the dead jobs' view: its state). */
export function filterOf(f) {
	const filter = {};
	for (const k of FILTERS)
		if (f[k])
			filter[k] = f[k];
	return filter;
}

/* The filter's form, and the list's order (asc: oldest first). */
export function filterForm(f, dead, asc) {
	const field = (k, label, input) => h('div', {class: 'field'},
		h('label', {for: 'f-' + k}, label), input);
	const text = (k, label, ph) => {
		const input = h('input', {id: 'f-' + k, name: k, value: f[k],
			placeholder: ph || null, type: k === 'workflow' ? 'number' :
				'text'});
		return field(k, label, k === 'queue' || k === 'kind' ?
			suggesting(input, k) : input);
	};
	const date = (k, label) => field(k, label, h('input', {
		id: 'f-' + k, name: k, type: 'datetime-local',
		value: toLocalInput(f[k])}));
	const state = dead ? null : field('state', 'State', h('select', {
		id: 'f-state', name: 'state'}, h('option', {value: ''}, 'any'),
	FILTER_STATES.map((s) => h('option', {value: s,
		selected: s === f.state}, s))));
	const order = h('select', {id: 'f-order', name: 'order'},
		h('option', {value: ''}, 'newest first'),
		h('option', {value: 'asc', selected: asc}, 'oldest first'));
	const form = h('form', {class: 'filters', id: 'filters',
		role: 'search'}, state, text('queue', 'Queue'),
	text('kind', 'Kind'), text('q', 'Text in payload or error',
		'press / to search'), dead ? null : [date('from',
		'Created from'), date('to', 'Created to'),
	text('limit_key', 'Limit key'), text('ordering_key',
		'Ordering key'), text('workflow', 'Workflow')],
	field('order', 'Order', order),
	h('div', {class: 'field buttons'},
		h('button', {type: 'submit', class: 'primary'}, 'Filter'),
		h('button', {type: 'button', onclick: () => {
			location.hash = dead ? '#/dead' : '#/jobs';
		}}, 'Clear')));
	form.addEventListener('submit', (ev) => {
		ev.preventDefault();
		const v = {};
		for (const k of FILTERS) {
			const e = form.elements.namedItem(k);
			if (!e)
				continue;
			v[k] = e.type === 'datetime-local' ?
				fromLocalInput(e.value) : e.value.trim();
		}
		v.order = order.value === 'asc' ? 'asc' : '';
		const target = (dead ? '#/dead' : '#/jobs') + query(v);
		if (location.hash === target)
			hooks.route();
		else
			location.hash = target;
	});
	/* A new order shows at once, with the filter as the form has it. */
	order.addEventListener('change', () => form.requestSubmit());
	return form;
}
