/*
 * pgjob web: the keyset pager of the jobs' and the workflows' lists.
 */
import {cap, h, num} from '/dom.js';
import {parseHashOf, refresh, S} from '/core.js';

/*
 * Newer, Older, Search older (oldest first, p.asc: Older, Newer, Search
 * newer).  The jobs' pages keep their position in the address ("before",
 * or "after" oldest first), so that a reload and Back stay there; the
 * workflows' page keeps it in p.cursors.
 */
export function drawPager(p, d, pager) {
	const kids = [];
	const inHash = !p.cursors;
	/* Where the next page goes, and where the first is. */
	const [to, from] = p.asc ? ['newer', 'older'] : ['older', 'newer'];
	const go = (before) => {
		if (!inHash) {
			p.cursors.push(p.before);
			p.before = before;
			refresh(true);
			return;
		}
		S.trail.push(location.hash);
		location.hash = pageHash(p, before);
	};
	if (inHash ? p.before : p.cursors.length)
		kids.push(h('button', {type: 'button', 'data-key': from,
			onclick: () => {
				if (!inHash) {
					p.before = p.cursors.pop();
					refresh(true);
				} else if (S.trail.length &&
					parseHashOf(S.trail[S.trail.length - 1]).name ===
					p.r.name) {
					location.hash = S.trail.pop();
				} else {
					location.hash = pageHash(p, '');
				}
			}}, '\u2190 ' + cap(from)));
	if (d.next !== null && d.next !== undefined)
		kids.push(h('button', {type: 'button', 'data-key': to,
			id: to, onclick: () => go(String(d.next))},
		cap(to) + ' \u2192'));
	else if (d.searched_to !== null && d.searched_to !== undefined)
		kids.push(h('span', {class: 'muted'}, 'Searched ' + (p.asc ?
			'up' : 'down') + ' to job ' + num(d.searched_to) + '. '),
		h('button', {type: 'button', 'data-key': 'search-' + to,
			id: 'search-' + to,
			onclick: () => go(String(d.searched_to))},
		'Search ' + to + ' \u2192'));
	pager.replaceChildren(...kids);
}

/* The address of this list from job before down, or after it up ('' the
 * first page). */
function pageHash(p, before) {
	const q = new URLSearchParams(p.r.q);
	const key = p.asc ? 'after' : 'before';
	q.delete('focus');
	if (before)
		q.set(key, before);
	else
		q.delete(key);
	const s = q.toString();
	return '#/' + p.r.name + (s ? '?' + s : '');
}
