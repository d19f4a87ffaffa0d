/*
 * pgjob web: the jobs' list and the dead jobs' view (#/jobs, #/dead).
 */
import {badge, cap, h, jobLink, num, region, short, showText,
	time} from '/dom.js';
import {get, main, operator, query, S} from '/core.js';
import {filterForm, filterOf, FILTERS} from '/filters.js';
import {drawPager} from '/pager.js';
import {bulkAll, bulkSelected} from '/bulk.js';

export function jobsPage(p, dead) {
	const f = {};
	for (const k of FILTERS)
		f[k] = p.r.q.get(k) || '';
	if (dead)
		f.state = 'dead';
	p.sel = new Set();
	/* Newest first, or oldest first (order=asc, server side: the same
	 * keyset paging the other way).  The page's position is in the
	 * address (a reload, Back): before a job, or after it. */
	p.asc = p.r.q.get('order') === 'asc';
	const at = p.r.q.get(p.asc ? 'after' : 'before') || '';
	p.before = /^[0-9]+$/.test(at) ? at : '';
	p.limit = 50;
	p.dead = dead;

	const form = filterForm(f, dead, p.asc);
	const count = h('span', {id: 'selected', class: 'muted'});
	const actions = operator() ? h('div', {class: 'actions',
		id: 'bulk'}, (dead ? ['retry', 'delete'] :
		['retry', 'cancel', 'delete']).map((a) => [
		h('button', {type: 'button', 'data-action': a + '-selected',
			onclick: () => bulkSelected(p, a)}, cap(a) + ' selected'),
	]), (dead ? ['retry', 'delete'] : ['retry', 'cancel',
		'delete']).map((a) => h('button', {type: 'button',
		'data-action': a + '-all', onclick: () => bulkAll(p, f, a)},
	cap(a) + ' all matching\u2026')), count) : null;
	const out = region('jobs');
	const pager = h('div', {class: 'pager', id: 'pager'});
	const matches = h('p', {id: 'match-count', class: 'muted'});
	main.append(h('h1', null, dead ? 'Dead jobs' : 'Jobs'), form,
		actions, matches, out, pager);

	p.url = () => '/api/jobs' + query(Object.assign({}, f,
		cursor(p, p.before), {limit: p.limit}));
	p.fetch = () => fetchJobs(p, f, pager);
	p.render = (d) => {
		out.replaceChildren(jobsTable(p, d.jobs || [], d));
		drawPager(p, d, pager);
		drawCount(p, count);
		drawMatches(d, matches);
	};
	p.count = count;
}

/*
 * A page of the filter's matches.  Where no index serves a filter the
 * server reads a bounded window of ids per request and says where it
 * stopped (searched_to): asked again from there, request after
 * request, until the page is full or the oldest job is reached, the
 * progress shown meanwhile; a search that has gone on for seconds
 * stops with a button to go on.  With a filter, how many match
 * (counted; past 300,000 rows in the tables, the planner's
 * estimate, said so).
 */
/* The order and the cursor of /api/jobs. */
function cursor(p, at) {
	return p.asc ? {order: 'asc', after: at} : {before: at};
}

async function fetchJobs(p, f, pager) {
	const t0 = Date.now();
	let jobs = [], before = p.before, d;
	for (;;) {
		d = (await get('/api/jobs' + query(Object.assign({}, f,
			cursor(p, before), {limit: p.limit - jobs.length})))).data;
		jobs = jobs.concat(d.jobs || []);
		if (jobs.length >= p.limit || d.searched_to === null ||
			d.searched_to === undefined || p !== S.page ||
			Date.now() - t0 > 4000)
			break;
		before = String(d.searched_to);
		pager.replaceChildren(h('span', {class: 'muted',
			id: 'searching'}, 'Searching ' + (p.asc ? 'newer' :
			'older') + ' jobs\u2026 (' + num(jobs.length) + ' found, ' +
			(p.asc ? 'up' : 'down') + ' to job ' + num(d.searched_to) +
			')'));
	}
	const out = {jobs: jobs, next: jobs.length >= p.limit ? d.next :
		null, searched_to: jobs.length >= p.limit ? null :
		d.searched_to, count: null, estimate: false};
	const filter = filterOf(f);
	if (Object.keys(filter).length) {
		const c = (await get('/api/jobs/count' + query(Object.assign(
			{estimate: 1}, filter)))).data;
		out.count = c.count;
		out.estimate = !!c.estimate;
	}
	return {text: JSON.stringify(out), data: out};
}

function drawMatches(d, el) {
	if (d.count === null || d.count === undefined) {
		el.replaceChildren();
		return;
	}
	el.replaceChildren(d.estimate ? h('span', {title: 'the ' +
		'database\'s estimate: too many jobs to count at each ' +
		'refresh'}, '\u2248 ' + num(d.count) + ' jobs match ' +
		'(an estimate)') : num(d.count) + (d.count === 1 ?
		' job matches' : ' jobs match'));
}

/* An error's last line (the one that says what went wrong: a Python
 * traceback ends with it), its end kept when cut, and how many lines
 * it has; the whole error in the tooltip. */
function lastLine(e) {
	if (e === null || e === undefined)
		return '';
	const lines = String(e).split(/\r?\n/).filter((l) => l.trim());
	let last = lines.length ? lines[lines.length - 1].trim() : '';
	if (last.length > 120)
		last = '\u2026' + last.slice(-119);
	return h('span', {class: 'lastline', title: String(e).slice(-2000)},
		showText(last, false), lines.length > 1 ? h('span', {
			class: 'muted'}, ' (its last line)') : null);
}

/* "2 / 5": attempts made of those allowed; the handler's
 * configuration decides when the job does not say. */
function attemptsOf(j) {
	if (j.max_attempts === null || j.max_attempts === undefined)
		return h('span', {title: 'at most: as the handler\'s ' +
			'configuration says (max_attempts)'}, String(j.attempts));
	return String(j.attempts) + ' / ' + String(j.max_attempts);
}

function jobsTable(p, jobs, d) {
	const op = operator();
	const heads = ['id', 'queue', 'kind', 'state', 'attempts',
		'priority', 'run at', 'created', 'finished', 'last error'];
	let all = null;
	if (op) {
		all = h('input', {type: 'checkbox', 'data-key': 'all',
			'aria-label': 'select every job of this page',
			checked: jobs.length > 0 && jobs.every((j) =>
				p.sel.has(j.id))});
		all.addEventListener('change', () => {
			for (const j of jobs)
				if (all.checked)
					p.sel.add(j.id);
				else
					p.sel.delete(j.id);
			for (const c of main.querySelectorAll('input.pick'))
				c.checked = all.checked;
			drawCount(p, p.count);
		});
	}
	const t = h('table', {class: 'jobs'}, h('thead', null, h('tr', null,
		op ? h('th', {scope: 'col'}, all) : null,
		heads.map((x) => h('th', {scope: 'col'}, x)))));
	const body = h('tbody');
	for (const j of jobs) {
		let pick = null;
		if (op) {
			pick = h('input', {type: 'checkbox', class: 'pick',
				'data-key': 'pick-' + j.id, 'aria-label': 'select job ' +
				j.id, checked: p.sel.has(j.id)});
			pick.addEventListener('change', () => {
				if (pick.checked)
					p.sel.add(j.id);
				else
					p.sel.delete(j.id);
				drawCount(p, p.count);
			});
		}
		body.appendChild(h('tr', {'data-id': j.id},
			op ? h('td', null, pick) : null,
			h('td', null, jobLink(j.id)),
			h('td', null, short(j.queue, 40)),
			h('td', null, short(j.kind, 60)),
			h('td', null, badge(j.state)),
			h('td', {class: 'n'}, attemptsOf(j)),
			h('td', {class: 'n'}, String(j.priority)),
			h('td', null, time(j.run_at)),
			h('td', null, time(j.created_at)),
			h('td', null, time(j.finished_at)),
			h('td', {class: 'err'}, lastLine(j.last_error))));
	}
	if (!jobs.length)
		body.appendChild(h('tr', null, h('td', {colspan: heads.length +
			(op ? 1 : 0), class: 'muted', id: 'no-match'},
		d && d.searched_to ? 'No match among the jobs ' + (p.asc ?
			'older' : 'newer') + ' than job ' + num(d.searched_to) +
			' yet: search ' + (p.asc ? 'newer' : 'older') + ', ' +
			'below.' : 'No job matches.')));
	t.appendChild(body);
	return h('div', {class: 'scroll'}, t);
}

function drawCount(p, el) {
	if (el)
		el.textContent = p.sel.size ? p.sel.size + ' selected' : '';
}
