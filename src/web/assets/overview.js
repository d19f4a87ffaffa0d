/*
 * pgjob web: the overview (#/): totals, throughput, queues, instances and
 * workers, the database's health.
 */
import {dl, fmtSecs, h, num, region, section, short, showText, table,
	time} from '/dom.js';
import {main} from '/core.js';
import {chart} from '/charts.js';
import {count, queueLink, wait} from '/queues.js';

/* --- overview --------------------------------------------------- */

export function overviewPage(p) {
	const out = region('overview');
	main.append(h('h1', null, 'Overview'), out);
	p.url = () => '/api/overview';
	p.render = (d) => out.replaceChildren(
		totals(d), unserved(d.unserved || []),
		section('Throughput, last hour (jobs per second)',
			chart(d.rates || [])),
		section('Queues', queueTable(d.queues || [], false)),
		section('Instances and workers', instances(d.instances || [])),
		section('Database health', health(d.health || {})));
}

/* Jobs that wait for a worker that will not come: their kind and
 * queue are served by no live worker (a typo in the queue, say). */
function unserved(list) {
	if (!list.length)
		return null;
	return h('p', {class: 'warn', id: 'unserved'},
		'Waiting, no live worker serves them: ',
		list.map((u, i) => [i ? '; ' : '', 'kind ', showText(u.kind),
			' in queue ', queueLink(u.queue), ' (' + num(u.jobs) +
			(u.kind_handled ? ', queue not served)' :
				', no handler)')]));
}

function totals(d) {
	const sum = {available: 0, scheduled: 0, running: 0, waiting: 0,
		dead: 0};
	const more = {}, near = {};
	for (const q of d.queues || [])
		for (const k in sum) {
			sum[k] += Number(q[k] || 0);
			if (Array.isArray(q.at_least) && q.at_least.includes(k))
				more[k] = true;
			if (Array.isArray(q.estimated) && q.estimated.includes(k))
				near[k] = true;
		}
	/* A total some queue's count stopped short of: the planner's
	 * estimate (never below what was counted), marked as one. */
	const est = d.estimated_totals || {};
	const figure = (k) => {
		if (more[k] && est[k] !== undefined)
			return h('span', {title: 'an estimate (the database\'s ' +
				'statistics): the queues\' counts stop at 1,000'},
			'\u2248 ' + num(Math.max(Math.round(est[k]), sum[k])));
		if (more[k])
			return h('span', {title: 'at least'}, '\u2265 ' +
				num(sum[k]));
		if (near[k])
			return h('span', {title: 'counted among the first ' +
				'1,000 due jobs of a queue: near, not exact'},
			'\u2248 ' + num(sum[k]));
		return num(sum[k]);
	};
	return h('div', {class: 'cards'}, Object.keys(sum).map((k) =>
		h('a', {class: 'card', 'data-card': k, href: k === 'dead' ?
			'#/dead' : '#/jobs?state=' + k},
		h('span', {class: 'n'}, figure(k)),
		h('span', {class: 'l'}, k))),
	d.estimates ? h('p', {class: 'muted note'},
		'\u2248 marks an estimate, \u2265 a lower bound: the ' +
		'queues\' counts stop at 1,000.') : null);
}

function queueTable(queues, full) {
	return table(['queue', 'available', 'scheduled', 'running',
		'waiting', 'dead', 'oldest waiting', 'paused'], queues.map((q) => [
		queueLink(q.queue), count(q, 'available'),
		count(q, 'scheduled'), count(q, 'running'),
		count(q, 'waiting'), count(q, 'dead'), wait(q), q.paused ? h('span', {
			class: 'badge paused'}, 'paused') : '']), 'num');
}

function kinds(k) {
	if (Array.isArray(k))
		return short(k.join(', '), 120);
	if (k && typeof k === 'object')
		return short(JSON.stringify(k), 120);
	return short(k, 120);
}

function instances(list) {
	if (!list.length)
		return h('p', {class: 'muted'}, 'No pgjobd instance is running.');
	return list.map((i) => h('div', {class: 'instance'},
		h('h3', null, showText(i.host, false), ' ',
			h('span', {class: 'muted'}, 'supervisor ',
				String(i.supervisor_pid || ''), ', pgjobd ',
				showText(i.version || '', false), ', ',
				String((i.workers || []).length), ' workers')),
		table(['slot', 'pid', 'started', 'heartbeat', 'kinds',
			'handler crashes'],
			(i.workers || []).map((w) => [String(w.slot),
				String(w.pid), time(w.started_at),
				h('span', {class: Number(w.heartbeat_age_seconds) >
					30 ? 'warn' : null},
				fmtSecs(w.heartbeat_age_seconds) + ' ago'),
				kinds(w.kinds), crashes(w)]))));
}

// A process handler's copies that ended unasked, and the kinds whose
// program keeps ending without answering a job (docs/handlers.md).
function crashes(w) {
	const loops = w.crash_loops || [];
	return h('span', null,
		h('span', {class: Number(w.process_crashes) > 0 ? 'warn' : 'muted'},
			num(w.process_crashes || 0)),
		loops.map((k) => h('span', {class: 'badge st-dead crash-loop',
			title: 'its program keeps ending without answering a job'},
		'crash loop: ', showText(k, false))));
}

function health(x) {
	return dl([
		['xmin horizon age', fmtSecs(x.xmin_horizon_age_seconds)],
		['held by', short(x.holder, 200)],
		['dead tuples (jobs)', num(x.dead_tuples)],
		['live tuples (jobs)', num(x.live_tuples)],
		['last vacuum', time(x.last_vacuum)],
	]);
}
