/*
 * pgjob web: the keyset pager of the jobs' and the workflows' lists.
 */
import {h, num} from '/dom.js';
import {parseHashOf, refresh, S} from '/core.js';

/*
 * Newer, Older, Search older.  The jobs' pages keep their position in
 * the address ("before"), so that a reload and Back stay there; the
 * workflows' page keeps it in p.cursors.
 */
export function drawPager(p, d, pager) {
	const kids = [];
	const inHash = !p.cursors;
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
		kids.push(h('button', {type: 'button', 'data-key': 'newer',
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
			}}, '\u2190 Newer'));
	if (d.next !== null && d.next !== undefined)
		kids.push(h('button', {type: 'button', 'data-key': 'older',
			id: 'older', onclick: () => go(String(d.next))},
		'Older \u2192'));
	else if (d.searched_to !== null && d.searched_to !== undefined)
		kids.push(h('span', {class: 'muted'}, 'Searched down to job ' +
			num(d.searched_to) + '. '), h('button', {type: 'button',
			'data-key': 'search-older', id: 'search-older',
			onclick: () => go(String(d.searched_to))},
		'Search older \u2192'));
	pager.replaceChildren(...kids);
}

/* The address of this list from job before down ('' the newest). */
function pageHash(p, before) {
	const q = new URLSearchParams(p.r.q);
	q.delete('focus');
	if (before)
		q.set('before', before);
	else
		q.delete('before');
	const s = q.toString();
	return '#/' + p.r.name + (s ? '?' + s : '');
}
