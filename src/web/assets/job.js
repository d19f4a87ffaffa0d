/*
 * pgjob web: one job (#/job/ID): its actions, attempts, timeline, fields,
 * payload and result.
 */
import {badge, dl, fmtSecs, h, jobLink, num, region, section, short,
	showText, table, time, when} from '/dom.js';
import {act, ApiError, main, notFound, operator, refresh, S, say, sayError,
	title, token} from '/core.js';

const SHOW_MAX = 100000; /* characters of a document shown before "show all" */

/* --- one job ---------------------------------------------------- */

export function jobPage(p) {
	const id = Number(p.r.arg);
	if (!Number.isSafeInteger(id) || id <= 0)
		return notFound(p);
	p.expanded = {};
	const h1 = h('h1', null, 'Job ' + id);
	/* The actions the job's state takes (pgjob.action_states()):
	 * drawn with its first answer, none for a job that is not. */
	const actions = operator() ? h('div', {class: 'actions',
		id: 'job-actions'}) : null;
	const out = region('job');
	main.append(h1, actions, out);
	p.url = () => '/api/job/' + id;
	p.render = (d) => {
		p.state = d.job.state;
		h1.replaceChildren('Job ' + id + ' ', badge(d.job.state));
		title('Job ' + id + ' (' + d.job.state + ')');
		if (actions)
			drawJobActions(p, id, actions);
		out.replaceChildren(...jobView(p, id, d));
	};
	p.missing = () => {
		h1.textContent = 'Job ' + id + ' not found';
		title('Job ' + id + ' not found');
		if (actions)
			actions.remove();
		const live = document.getElementById('live');
		if (live)
			live.remove();
		out.replaceChildren(h('p', {id: 'not-found'}, 'No job ' + id +
			' in this database: it never was, or it was deleted or ' +
			'pruned. ', h('a', {href: '#/jobs'}, 'To the jobs')));
	};
}

const JOB_ACTS = {retry: ['dead', 'cancelled', 'done', 'available'],
	cancel: ['waiting', 'available', 'running']};

function drawJobActions(p, id, el) {
	const kids = [];
	if (JOB_ACTS.retry.includes(p.state))
		kids.push(h('button', {type: 'button', 'data-action': 'retry',
			onclick: () => act('/api/jobs/retry', {ids: [id]}, (d) =>
				d.affected ? 'Job ' + id + ' will run again now.' :
					'Job ' + id + ' cannot be retried in its state.')},
		p.state === 'available' ? 'Run now' : 'Retry'));
	if (JOB_ACTS.cancel.includes(p.state))
		kids.push(h('button', {type: 'button', 'data-action': 'cancel',
			onclick: () => cancelJob(p, id)}, 'Cancel'));
	const now = [...el.children].map((b) => b.textContent).join();
	if (now !== kids.map((b) => b.textContent).join())
		el.replaceChildren(...kids);
}

/* A running job too, as `pgjob cancel` does: its worker stops it at
 * its next lease renewal.  A confirmation that says so. */
function cancelJob(p, id) {
	const running = p.state === 'running';
	if (!confirm(running ? 'Job ' + id + ' is running: stop it? Its ' +
		'worker stops it at its next lease renewal.' :
		'Cancel job ' + id + '?'))
		return;
	act('/api/jobs/cancel', running ? {ids: [id], stop_running: true} :
		{ids: [id]}, (d) => d.affected ? 'Job ' + id + (running ?
		' cancelled: its worker stops it.' : ' cancelled.') :
		'Job ' + id + ' cannot be cancelled in its state.');
}

const JOB_SKIP = ['payload', 'result', 'payload_truncated',
	'payload_text', 'payload_bytes', 'result_truncated', 'result_text',
	'result_bytes', 'last_error', 'id', 'state'];

function value(k, v) {
	if (v === null || v === undefined)
		return h('span', {class: 'muted'}, '\u2013');
	if (k === 'workflow_id')
		return h('a', {href: '#/workflow/' + Number(v)}, String(v));
	if (typeof v === 'string' && /_at$|_until$/.test(k))
		return time(v);
	if (typeof v === 'object')
		return showText(JSON.stringify(v), false);
	return short(v, 300);
}

function jobView(p, id, d) {
	const j = d.job;
	const fields = Object.keys(j).filter((k) => !JOB_SKIP.includes(k))
		.map((k) => [k.replace(/_/g, ' '), value(k, j[k])]);
	const parts = [];
	if (j.last_error !== null && j.last_error !== undefined)
		parts.push(section('Last error', h('pre', {class: 'doc err',
			id: 'last-error'}, showText(j.last_error, true))));
	parts.push(section('Attempts', attempts(d.attempts || [])));
	parts.push(section('Timeline', timeline(d.timeline || [])));
	if (d.lease)
		parts.push(section('Lease', dl([
			['holder', short(d.lease.holder, 200)],
			['until', when(d.lease.locked_until)],
			['token', String(d.lease.token)]])));
	parts.push(section('Fields', dl(fields, 'kv fields')));
	parts.push(section('Payload', doc(p, id, 'payload', j)));
	parts.push(section('Result', doc(p, id, 'result', j)));
	if ((d.parents || []).length || (d.children || []).length)
		parts.push(section('Workflow', dl([
			['waits for', relatives(d.parents || [])],
			['awaited by', relatives(d.children || [])]])));
	if (d.enqueue_command)
		parts.push(section('Enqueue a copy', enqueueCommand(
			d.enqueue_command)));
	return parts;
}

function relatives(list) {
	if (!list.length)
		return h('span', {class: 'muted'}, 'none');
	return h('ul', {class: 'inline'}, list.map((x) => h('li', null,
		jobLink(x.id), ' ', x.step ? short(x.step, 60) : '', ' ',
		badge(x.state))));
}

function attempts(list) {
	return table(['#', 'started', 'finished', 'worker', 'outcome',
		'status', 'error', 'wall', 'cpu', 'max RSS'], list.map((a) => [
		String(a.attempt), time(a.started_at), time(a.finished_at),
		short(a.worker, 80), a.outcome ? h('span', {class: 'badge oc-' +
			String(a.outcome).replace(/[^a-z]/g, '')},
		showText(a.outcome, false)) : '',
		a.status === null || a.status === undefined ? '' :
			String(a.status),
		a.error === null || a.error === undefined ? '' :
			h('pre', {class: 'cellpre'}, showText(String(a.error)
				.slice(0, 4000), true)),
		a.wall_ms === null || a.wall_ms === undefined ? '' :
			num(a.wall_ms) + ' ms',
		a.cpu_ms === null || a.cpu_ms === undefined ? '' :
			num(a.cpu_ms) + ' ms',
		a.max_rss_kb === null || a.max_rss_kb === undefined ? '' :
			num(a.max_rss_kb) + ' kB']), 'attempts');
}

/* A download needs the token too (a link cannot send it): fetched,
 * then saved from memory. */
async function save(path, file) {
	try {
		const r = await fetch(path, {credentials: 'same-origin',
			headers: {'X-CSRF-Token': S.session.csrf || token()}});
		if (!r.ok)
			throw new ApiError(r.status, 'HTTP ' + r.status);
		const url = URL.createObjectURL(await r.blob());
		const a = h('a', {href: url, download: file});
		document.body.appendChild(a);
		a.click();
		a.remove();
		setTimeout(() => URL.revokeObjectURL(url), 60000);
	} catch (e) {
		sayError(e, 'action');
	}
}

/* A payload or result: pretty JSON as text; cut above SHOW_MAX
 * characters (or above the server's 64 KiB) with the whole document as
 * a download. */
function doc(p, id, name, j) {
	const file = 'job-' + id + '-' + name + '.json';
	const download = h('a', {href: '/api/job/' + id + '/' + name,
		download: file, id: name + '-download',
		onclick: (ev) => {
			ev.preventDefault();
			save('/api/job/' + id + '/' + name, file);
		}}, 'download all');
	if (j[name + '_truncated'])
		return h('div', null, h('p', {class: 'muted'},
			'The first 64 KiB of ' + num(j[name + '_bytes']) +
			' bytes; ', download, '.'), h('pre', {class: 'doc',
			id: name}, showText(j[name + '_text'], true)));
	if (j[name] === null || j[name] === undefined)
		return h('p', {class: 'muted'}, 'none');
	const text = JSON.stringify(j[name], null, 2);
	if (text.length <= SHOW_MAX || p.expanded[name])
		return h('pre', {class: 'doc', id: name}, showText(text, true));
	return h('div', null, h('p', {class: 'muted'}, 'The first ' +
		num(SHOW_MAX) + ' of ' + num(text.length) + ' characters; ',
	h('button', {type: 'button', class: 'link', 'data-key': 'all-' +
		name, onclick: () => {
		p.expanded[name] = true;
		refresh(true);
	}}, 'show all'), ' or ', download, '.'),
	h('pre', {class: 'doc', id: name}, showText(
		text.slice(0, SHOW_MAX), true)));
}

function enqueueCommand(cmd) {
	const pre = h('pre', {class: 'doc', id: 'enqueue-command'},
		showText(cmd, true));
	const copy = h('button', {type: 'button', 'data-key': 'copy'},
		'Copy');
	copy.addEventListener('click', async () => {
		try {
			await navigator.clipboard.writeText(cmd);
			say('info', 'The command is on the clipboard.');
		} catch (e) {
			/* No clipboard (a plain-HTTP host): select it instead. */
			const r = document.createRange();
			r.selectNodeContents(pre);
			const s = getSelection();
			s.removeAllRanges();
			s.addRange(r);
			say('info', 'Selected: press Ctrl+C to copy.');
		}
	});
	return h('div', null, pre, copy);
}

/* A job's timeline (pgjob.job_timeline()), oldest first. */
function timeline(list) {
	if (!list.length)
		return h('p', {class: 'muted'}, 'none');
	return h('ol', {class: 'timeline', id: 'timeline'}, list.map((e) =>
		h('li', {class: 'ev-' + String(e.event).replace(/[^a-z]/g, '')},
			time(e.at), ' ', h('strong', null, showText(String(e.event),
				false)), e.attempt !== null && e.attempt !== undefined ?
				' #' + Number(e.attempt) : '', e.worker ? h('span', null,
				' on ', short(e.worker, 80)) : '',
			e.wait_ms !== null && e.wait_ms !== undefined ? h('span',
				{class: 'muted'}, ' after ' + fmtSecs(Number(e.wait_ms) /
				1000)) : '', e.detail ? h('span', null, ' \u2014 ',
				short(e.detail, 300)) : '')));
}
