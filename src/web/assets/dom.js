/*
 * pgjob web: building the document, and the formats of what it shows.
 *
 * Everything an application or a handler wrote (kinds, queues, payloads,
 * errors, keys, step names) is hostile: it reaches the document only as
 * text (textContent, createTextNode, setAttribute of a fixed attribute),
 * never as markup; control and invisible characters are shown as \uXXXX
 * (showText).  Nothing here uses innerHTML.  This module imports nothing.
 */

export const STATES = ['available', 'running', 'waiting', 'done', 'dead',
	'cancelled'];

/* --- building the document ------------------------------------- */

/*
 * h('tag', {attr: value, onclick: fn, text: 'x'}, child, ...): an
 * element; strings among the children become text nodes.  Attribute
 * values go through setAttribute (an attribute is never markup).
 */
export function h(tag, props, ...kids) {
	return build(document.createElement(tag), props, kids);
}

export function svg(tag, props, ...kids) {
	return build(document.createElementNS(
		'http://www.w3.org/2000/svg', tag), props, kids);
}

function build(e, props, kids) {
	for (const k in props || {}) {
		const v = props[k];
		if (v === null || v === undefined || v === false)
			continue;
		if (k === 'text')
			e.textContent = v;
		else if (k === 'class')
			e.setAttribute('class', v);
		else if (k.startsWith('on'))
			e.addEventListener(k.slice(2), v);
		else if (typeof v === 'boolean')
			e[k] = v;
		else
			e.setAttribute(k, String(v));
	}
	append(e, kids);
	return e;
}

function append(e, kids) {
	for (const k of kids.flat(Infinity)) {
		if (k === null || k === undefined || k === false)
			continue;
		e.appendChild(typeof k === 'object' ? k
			: document.createTextNode(String(k)));
	}
	return e;
}

/* Characters that would hide or disguise text: C0/C1 controls, DEL,
 * zero-width and bidirectional controls, separators. */
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;
const HIDDEN_ML = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

/*
 * s as text nodes, each hidden character drawn as a marked \uXXXX
 * (multiline: newlines and tabs kept).  U+FFFD, which the server puts
 * for invalid UTF-8, shows as itself.
 */
export function showText(s, multiline) {
	const f = document.createDocumentFragment();
	if (s === null || s === undefined)
		return f;
	s = String(s);
	const re = multiline ? HIDDEN_ML : HIDDEN;
	let run = '';
	for (const c of s) {
		if (re.test(c)) {
			if (run)
				f.appendChild(document.createTextNode(run));
			run = '';
			const hex = c.codePointAt(0).toString(16)
				.padStart(4, '0');
			f.appendChild(h('span', {class: 'esc',
				title: 'hidden character'}, '\\u' + hex));
		} else {
			run += c;
		}
	}
	if (run)
		f.appendChild(document.createTextNode(run));
	return f;
}

/* A one-line cell: at most n characters, the whole in a title. */
export function short(s, n) {
	if (s === null || s === undefined)
		return '';
	s = String(s);
	const cut = s.length > n ? s.slice(0, n) + '\u2026' : s;
	return h('span', {title: s.length > n ? s.slice(0, 2000) : null},
		showText(cut, false));
}

export function fmtTime(t) {
	if (!t)
		return '';
	const d = new Date(t);
	if (isNaN(d))
		return String(t);
	const p = (n) => String(n).padStart(2, '0');
	return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' +
		p(d.getDate()) + ' ' + p(d.getHours()) + ':' +
		p(d.getMinutes()) + ':' + p(d.getSeconds());
}

export function time(t) {
	return t ? h('time', {datetime: t, title: t}, fmtTime(t)) : '';
}

/* t, and how far from now it is ("in 21 s", "3 min ago"): the
 * browser's clock. */
export function when(t) {
	if (!t)
		return '';
	const d = (new Date(t) - Date.now()) / 1000;
	if (isNaN(d))
		return time(t);
	return h('span', {class: 'when'}, time(t), h('span', {
		class: 'muted'}, d >= 0 ? ' in ' + fmtSecs(d) : ' ' +
		fmtSecs(-d) + ' ago'));
}

export function fmtSecs(s) {
	if (s === null || s === undefined || s === '')
		return '';
	s = Number(s);
	if (s < 60)
		return s.toFixed(s < 10 ? 1 : 0) + ' s';
	if (s < 3600)
		return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
	if (s < 86400)
		return Math.floor(s / 3600) + ' h ' +
			Math.floor(s % 3600 / 60) + ' min';
	return Math.floor(s / 86400) + ' d ' +
		Math.floor(s % 86400 / 3600) + ' h';
}

export function num(n) {
	return n === null || n === undefined ? '' : Number(n)
		.toLocaleString('en-US');
}

export function badge(state) {
	return h('span', {class: 'badge st-' + (STATES.includes(state) ?
		state : 'other')}, showText(state, false));
}

export function jobLink(id) {
	return h('a', {href: '#/job/' + Number(id)}, String(id));
}

/* A table: heads, then rows of cells (a cell: text or a node).  A head
 * is its label, a node, or {label, th (the th's attributes), content}
 * (sort.js: a button in the header). */
export function table(heads, rows, cls) {
	const label = (x) => typeof x === 'string' ? x : x && x.th ? x.label :
		null;
	return h('div', {class: 'scroll'}, h('table', {class: cls || null},
		h('thead', null, h('tr', null, heads.map((x) => x && x.th ?
			h('th', Object.assign({scope: 'col'}, x.th), x.content) :
			h('th', {scope: 'col'}, x)))),
		h('tbody', null, rows.length ? rows.map((r) => h('tr', null,
			r.map((c, i) => h('td', {'data-label': label(heads[i]) ||
				null}, c)))) :
			h('tr', null,
			h('td', {colspan: heads.length, class: 'muted'},
				'nothing')))));
}

export function dl(pairs, cls) {
	return h('dl', {class: cls || 'kv'}, pairs.map(([k, v]) =>
		h('div', null, h('dt', null, k), h('dd', null, v))));
}

export function section(title, ...kids) {
	return h('section', null, h('h2', null, title), kids);
}

/* A region rebuilt at each refresh. */
export function region(id) {
	return h('div', {id: id, class: 'region', 'aria-live': 'off'});
}

export function cap(s) {
	return s.charAt(0).toUpperCase() + s.slice(1);
}

/* A percentile in ms as the console shows it ("\u2264 362 ms"; on an
 * axis, without the sign). */
export function fmtMs(v, axis) {
	if (v === null || v === undefined)
		return '';
	v = Number(v);
	return (axis ? '' : '\u2264 ') + (v < 1000 ? num(Math.round(v)) + ' ms' :
		v < 120000 ? (v / 1000).toFixed(1) + ' s' :
			fmtSecs(v / 1000));
}

/* A string for an SVG text node: hidden characters as \uXXXX, cut. */
export function visible(s, n) {
	let out = '';
	for (const c of String(s))
		out += HIDDEN.test(c) ? '\\u' + c.codePointAt(0).toString(16)
			.padStart(4, '0') : c;
	return out.length > n ? out.slice(0, n - 1) + '\u2026' : out;
}
