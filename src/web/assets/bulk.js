/*
 * pgjob web: actions on many jobs: the selected ones, or every match of
 * a filter (counted, confirmed, in steps, its progress shown).
 */
import {cap, num} from '/dom.js';
import {act, get, post, query, refresh, say, sayError} from '/core.js';
import {filterOf} from '/filters.js';

const PAST = {retry: 'retried', cancel: 'cancelled', delete: 'deleted'};

export function bulkSelected(p, a) {
	const ids = [...p.sel];
	if (!ids.length) {
		say('error', 'Select jobs first (the boxes of the first column).',
			'action');
		return;
	}
	if (!confirm(cap(a) + ' ' + ids.length + ' selected job' +
		(ids.length === 1 ? '' : 's') + '?'))
		return;
	p.sel.clear();
	act('/api/jobs/' + a, {ids: ids}, (d) => num(d.affected) +
		' of ' + ids.length + ' selected jobs ' + PAST[a] + '.');
}

/* Jobs per request of an action on a filter's matches: the page
 * shows how far it has come after each. */
const STEP = 5000;

/*
 * "... all matching": the exact count first (in parts, with its
 * progress, on a big table), in the confirmation (any action, a retry
 * too); then the action, from where the count started, STEP jobs a
 * request, its progress in the banner and the list's buttons disabled
 * until it ends.
 */
export async function bulkAll(p, f, a) {
	const filter = filterOf(f);
	const buttons = [...document.querySelectorAll('#bulk button')];
	const busy = (on) => buttons.forEach((b) => {
		b.disabled = on;
	});
	let n = 0, below = null, again = '';
	busy(true);
	say('info', 'Counting the jobs that match\u2026', 'action');
	try {
		/* On a big table where no index serves the filter, the
		 * server counts a part of the ids a request and says where to
		 * go on (next); the action then starts where the count did
		 * (below), rather than have the server count it all again in
		 * its first request. */
		for (let from = null; ;) {
			const d = (await get('/api/jobs/count' + query(
				Object.assign({}, filter,
					from ? {before: from} : {})))).data;
			n += d.count;
			if (d.next === null || d.next === undefined)
				break;
			if (below === null)
				below = String(d.below);
			from = String(d.next);
			say('info', 'Counting the jobs that match\u2026 ' +
				num(n) + ' so far, down to job ' + num(d.next),
				'action');
		}
	} catch (e) {
		busy(false);
		sayError(e, 'action');
		return;
	}
	say('', '');
	/* The server takes no more than the count confirmed: when more
	 * match by then, it answers 409 with their number, asked here
	 * again. */
	for (;;) {
		if (!confirm(again + cap(a) + ' all ' + num(n) + ' job' +
			(n === 1 ? '' : 's') + ' matching this filter?' +
			(Object.keys(filter).length ? '' :
				' (No filter: that is every job.)')))
			break;
		p.sel.clear();
		let done = 0, before = below, yielded = false;
		try {
			for (;;) {
				/* The server pauses between its statements while
				 * the database is busy (docs/console.md, "Bulk
				 * actions"), and says so. */
				say('info', cap(ING[a]) + '\u2026 ' + num(done) +
					' of ' + num(n) + ' jobs' + (yielded ?
					' (giving way to busy workers)' : ''),
				'action');
				const r = await post('/api/jobs/' + a, Object.assign({
					filter: filter, expect: n - done, limit: STEP},
				before ? {before: before} : {}));
				done += r.data.affected;
				yielded = r.data.yielded === true;
				if (r.data.next === null || r.data.next === undefined)
					break;
				before = String(r.data.next);
			}
			say('info', num(done) + ' jobs ' + PAST[a] + ' (' + num(n) +
				' matched when asked).', 'action');
		} catch (e) {
			if (!done && e.status === 409 && e.data &&
				Number.isSafeInteger(e.data.count)) {
				again = 'Now ' + num(e.data.count) +
					' jobs match, not ' + num(n) + '. ';
				n = e.data.count;
				continue;
			}
			sayError(e, 'action');
		}
		break;
	}
	busy(false);
	refresh(true);
}

const ING = {retry: 'retrying', cancel: 'cancelling',
	delete: 'deleting'};
