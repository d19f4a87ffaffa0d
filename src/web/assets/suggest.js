/*
 * pgjob web: the names the jobs' queue and kind fields suggest
 * (docs/console.md, "Filters"): the queues and kinds pgjobd knows (the
 * overview's queues, its workers' kinds and the kinds no worker serves;
 * the kinds and queues of the last 30 days' history), read once a minute
 * at most, those that contain what is typed, in any case, shown in a list
 * under the field (a combobox: the arrows move, Enter or a click picks,
 * Escape closes).  A name is an application's, so hostile: text only.
 * The filter itself matches a name exactly.
 */
import {h, showText} from '/dom.js';
import {get} from '/core.js';

const MAX = 8;          /* suggestions shown */
const FRESH_MS = 60000; /* how long the names read serve */

let names = null, readAt = 0, reading = null;

function add(set, v) {
	if (typeof v === 'string' && v)
		set.add(v);
}

/* {queue: [...], kind: [...]}, read again when older than FRESH_MS; a
 * failed read suggests nothing (the field works as before). */
async function known() {
	if (names && Date.now() - readAt < FRESH_MS)
		return names;
	if (!reading)
		reading = (async () => {
			const queue = new Set(), kind = new Set();
			const [o, hist] = await Promise.all([get('/api/overview'),
				get('/api/history?range=30d')]);
			for (const q of o.data.queues || [])
				add(queue, q.queue);
			for (const u of o.data.unserved || []) {
				add(queue, u.queue);
				add(kind, u.kind);
			}
			for (const i of o.data.instances || [])
				for (const w of i.workers || [])
					if (Array.isArray(w.kinds))
						w.kinds.forEach((k) => add(kind, k));
			for (const k of hist.data.kinds || []) {
				add(queue, k.queue);
				add(kind, k.kind);
			}
			const sorted = (s) => [...s].sort((a, b) => a.localeCompare(b));
			names = {queue: sorted(queue), kind: sorted(kind)};
			readAt = Date.now();
			return names;
		})().catch(() => names || {queue: [], kind: []})
			.finally(() => {
				reading = null;
			});
	return reading;
}

/* The names containing v (any case): those that begin with it first. */
function matches(list, v) {
	const l = v.toLowerCase();
	const hit = list.filter((n) => n.toLowerCase().includes(l));
	return hit.filter((n) => n.toLowerCase().startsWith(l)).concat(
		hit.filter((n) => !n.toLowerCase().startsWith(l))).slice(0, MAX);
}

/* n with the part that matched v marked, as text. */
function marked(n, v) {
	const i = v ? n.toLowerCase().indexOf(v.toLowerCase()) : -1;
	if (i < 0)
		return showText(n, false);
	return [showText(n.slice(0, i), false), h('mark', null,
		showText(n.slice(i, i + v.length), false)),
	showText(n.slice(i + v.length), false)];
}

/*
 * Makes input (the field of what: "queue" or "kind") suggest; returns the
 * field's box, the input and its list.
 */
export function suggesting(input, what) {
	const id = input.id + '-list';
	const list = h('ul', {id: id, class: 'suggestions', role: 'listbox',
		'aria-label': what + 's known', hidden: true});
	let shown = [], active = -1;
	input.setAttribute('role', 'combobox');
	input.setAttribute('aria-autocomplete', 'list');
	input.setAttribute('aria-controls', id);
	input.setAttribute('aria-expanded', 'false');
	input.setAttribute('autocomplete', 'off');

	const close = () => {
		list.hidden = true;
		list.replaceChildren();
		shown = [];
		active = -1;
		input.setAttribute('aria-expanded', 'false');
		input.removeAttribute('aria-activedescendant');
	};
	const pick = (n) => {
		input.value = n;
		close();
		input.focus();
	};
	const mark = () => [...list.children].forEach((li, i) => {
		li.setAttribute('aria-selected', i === active ? 'true' : 'false');
		if (i === active)
			input.setAttribute('aria-activedescendant', li.id);
	});
	const open = async () => {
		const all = (await known())[what] || [];
		if (document.activeElement !== input)
			return;
		const v = input.value.trim();
		shown = matches(all, v).filter((n) => n !== v);
		active = -1;
		if (!shown.length)
			return close();
		list.replaceChildren(...shown.map((n, i) => h('li', {
			id: id + '-' + i, role: 'option', 'aria-selected': 'false',
			onmousedown: (ev) => {
				/* before the field's blur closes the list */
				ev.preventDefault();
				pick(n);
			}}, marked(n, v))));
		list.hidden = false;
		input.setAttribute('aria-expanded', 'true');
	};
	input.addEventListener('input', open);
	input.addEventListener('focus', open);
	input.addEventListener('blur', close);
	input.addEventListener('keydown', (ev) => {
		if (list.hidden)
			return;
		if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
			ev.preventDefault();
			/* none, then each name, round */
			const n = shown.length + 1;
			active = (active + 1 + (ev.key === 'ArrowDown' ? 1 : -1) +
				n) % n - 1;
			mark();
		} else if (ev.key === 'Enter' && active >= 0) {
			/* a pick, not yet the filter */
			ev.preventDefault();
			pick(shown[active]);
		} else if (ev.key === 'Escape') {
			ev.preventDefault();
			close();
		}
	});
	return h('div', {class: 'suggest'}, input, list);
}
