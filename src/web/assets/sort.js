/*
 * pgjob web: a list's order by a column's header (docs/console.md,
 * "Sorting"): a click sorts by that column, ascending, a second click
 * descending; the order is in the address (sort=KEY or sort=-KEY, or
 * another parameter for a page's second table), so that a reload and a
 * link keep it, and the header says it (an arrow, aria-sort).  It orders
 * the rows the page read (the queues, schedules and tasks whole; a page of
 * the workflows) in the browser: names compare as text, never as markup.
 */
import {h, table} from '/dom.js';
import {redraw} from '/core.js';

/* A time's milliseconds, or null: times sort as times. */
export function at(t) {
	const v = t ? Date.parse(t) : NaN;
	return isNaN(v) ? null : v;
}

/* Nulls last whichever the direction; numbers as numbers; text by the
 * browser's collation, digits as numbers ("q2" before "q10"). */
function compare(a, b) {
	const none = (v) => v === null || v === undefined || v === '';
	if (none(a) || none(b))
		return none(a) - none(b);
	if (typeof a === 'number' && typeof b === 'number')
		return a - b;
	return String(a).localeCompare(String(b), undefined, {numeric: true});
}

/* The order the address gives param: {key, desc}, or null. */
function orderOf(p, param, keys) {
	const v = p.r.q.get(param) || '';
	const key = v.replace(/^-/, '');
	return keys.includes(key) ? {key: key, desc: v.startsWith('-')} : null;
}

/* Sets param in the address (without a new history entry, nor a new
 * page: the same rows, drawn again). */
function setOrder(p, param, v) {
	p.r.q.set(param, v);
	const path = location.hash.replace(/\?.*$/, '');
	history.replaceState(history.state, '', path + '?' + p.r.q.toString());
	redraw(p);
}

/*
 * The table of items in the order the address gives: cols are [key,
 * label, value], value(item) what the column sorts by (none: the column
 * does not sort); row(item) its cells.  Ties keep the server's order.
 */
export function sortedTable(p, param, cols, items, row, cls) {
	const keys = cols.filter((c) => c[2]).map((c) => c[0]);
	const o = orderOf(p, param, keys);
	let list = items;
	if (o) {
		const value = cols.find((c) => c[0] === o.key)[2];
		list = items.map((x, i) => [value(x), i, x]).sort((a, b) =>
			(o.desc ? -compare(a[0], b[0]) : compare(a[0], b[0])) ||
			a[1] - b[1]).map((x) => x[2]);
	}
	const heads = cols.map(([key, label, value]) => {
		if (!value)
			return label;
		const on = o && o.key === key;
		return {label: label, th: {'aria-sort': on ? (o.desc ?
			'descending' : 'ascending') : null}, content: h('button', {
			type: 'button', class: 'sort', 'data-sort': key,
			'data-key': 'sort-' + param + '-' + key,
			title: 'sort by ' + label, onclick: () => setOrder(p, param,
				(on && !o.desc ? '-' : '') + key)}, label,
		h('span', {class: 'arrow', 'aria-hidden': 'true'}, on ?
			(o.desc ? ' \u25bc' : ' \u25b2') : ''))};
	});
	return table(heads, list.map(row), cls);
}
