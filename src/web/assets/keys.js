/*
 * pgjob web: the keyboard (docs/console.md, "Keyboard").  / the text
 * filter; g then o, j, q, s, t, w or d a page; j and k the next and the
 * previous row of the page's table (Enter opens its link); r refresh now;
 * p pause or resume the live updates; ? this list, in a dialog that
 * Escape closes.  None fires while a text field, a list or an editable
 * element has the focus, nor with Ctrl, Alt or Meta held.
 */
import {h} from '/dom.js';
import {hooks, main, refresh, S, toggleLive} from '/core.js';

/* g + key: the page. */
const GO = {o: ['#/', 'the overview'], j: ['#/jobs', 'jobs'],
	q: ['#/queues', 'queues'], s: ['#/schedules', 'schedules'],
	t: ['#/tasks', 'tasks'], w: ['#/workflows', 'workflows'],
	d: ['#/dead', 'dead jobs']};
/* How long a g waits for its page's key. */
const G_MS = 2000;

const HELP = [
	['/', 'search the jobs (the text filter)'],
	...Object.entries(GO).map(([k, [, what]]) => ['g ' + k, 'go to ' +
		what]),
	['j / k', 'the next / the previous row (Enter opens it)'],
	['r', 'refresh now'],
	['p', 'pause / resume the live updates'],
	['?', 'this list (Escape closes it)'],
];

let g = 0; /* when g was pressed, 0: not pending */

/* Whether keys go to what has the focus: text typed, an option picked. */
function typing(t) {
	if (!t || !t.tagName)
		return false;
	if (t.isContentEditable || /^(TEXTAREA|SELECT)$/.test(t.tagName))
		return true;
	return t.tagName === 'INPUT' && !/^(checkbox|radio|button|submit|reset)$/
		.test(t.type);
}

/* The rows j and k move through: the page's first table's, with data. */
function rows() {
	const t = main.querySelector('.region table');
	return t ? [...t.tBodies].flatMap((b) => [...b.rows])
		.filter((r) => r.cells.length > 1) : [];
}

/* Marks row i of the page (p.row), and focuses its first link or
 * button; again after each redraw, where the row is the same index. */
function mark(p, focus) {
	const list = rows();
	for (const r of main.querySelectorAll('tr.kbd'))
		r.classList.remove('kbd');
	if (p.row === undefined || !list.length)
		return;
	p.row = Math.max(0, Math.min(p.row, list.length - 1));
	const r = list[p.row];
	r.classList.add('kbd');
	/* After a redraw took the focused row's link away, its new one. */
	if (focus || (p.focused && !p.focused.isConnected &&
		document.activeElement === document.body)) {
		p.focused = r.querySelector('a[href], button');
		if (p.focused)
			p.focused.focus({preventScroll: !focus});
		if (focus)
			r.scrollIntoView({block: 'nearest'});
	}
}

let dialog = null;

function help() {
	if (!dialog) {
		dialog = h('dialog', {id: 'keys-help', 'aria-labelledby':
			'keys-title'}, h('h2', {id: 'keys-title'}, 'Keyboard'),
		h('dl', {class: 'kv keys'}, HELP.map(([k, what]) => h('div', null,
			h('dt', null, k.split(' ').map((x, i) => [i ? ' ' : '',
				x === '/' && i ? x : h('kbd', null, x)])),
			h('dd', null, what)))),
		h('form', {method: 'dialog'}, h('button', {type: 'submit',
			id: 'keys-close'}, 'Close')));
		document.body.appendChild(dialog);
	}
	if (!dialog.open)
		dialog.showModal();
}

function onKey(ev) {
	if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target) ||
		(dialog && dialog.open) || !S.page)
		return;
	const k = ev.key;
	if (g && Date.now() - g < G_MS && Object.hasOwn(GO, k)) {
		g = 0;
		ev.preventDefault();
		location.hash = GO[k][0];
		return;
	}
	g = 0;
	const p = S.page;
	switch (k) {
	case '/': {
		const box = document.getElementById('f-q');
		if (box)
			box.focus();
		else
			location.hash = '#/jobs?focus=1';
		break;
	}
	case 'g':
		g = Date.now();
		break;
	case 'j':
	case 'k':
		p.row = p.row === undefined ? 0 : p.row + (k === 'j' ? 1 : -1);
		mark(p, true);
		break;
	case 'r':
		refresh(true);
		break;
	case 'p':
		if (!p.url)
			return;
		toggleLive();
		break;
	case '?':
		help();
		break;
	default:
		return;
	}
	ev.preventDefault();
}

/* The keys on, and the row mark kept over redraws. */
export function keyboard() {
	document.addEventListener('keydown', onKey);
	hooks.rendered = (p) => mark(p, false);
}
