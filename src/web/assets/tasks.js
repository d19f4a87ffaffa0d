/*
 * pgjob web: the leased tasks and the cluster's duties (#/tasks).
 */
import {h, region, section, short, when} from '/dom.js';
import {main} from '/core.js';
import {at, sortedTable} from '/sort.js';

/* The columns: [key, label, what it sorts by]; the duties' table has its
 * own order (sort_duties). */
const TASK_COLS = [
	['task', 'task', (t) => t.name],
	['partition', 'partition', (t) => Number(t.partition)],
	['holder', 'holder', (t) => t.holder],
	['token', 'fencing token', (t) => Number(t.token)],
	['expires', 'lease expires', (t) => at(t.expires_at)],
	['expired', '', null],
];
const DUTY_COLS = [
	['duty', 'duty', (t) => t.name],
	['holder', 'holder', (t) => t.holder],
	['token', 'fencing token', (t) => Number(t.token)],
	['expires', 'lease expires', (t) => at(t.expires_at)],
];

export function tasksPage(p) {
	const out = region('tasks');
	p.always = true; /* "in 21 s" moves on */
	main.append(h('h1', null, 'Tasks and duties'), out);
	p.url = () => '/api/tasks';
	p.render = (d) => out.replaceChildren(
		section('Leased tasks', sortedTable(p, 'sort', TASK_COLS,
			d.tasks || [], (t) => [short(t.name, 60),
				String(t.partition), short(t.holder, 80),
				String(t.token), when(t.expires_at), t.expired ?
					h('span', {class: 'badge st-dead'}, 'expired') :
					''])),
		section('Cluster duties', sortedTable(p, 'sort_duties',
			DUTY_COLS, d.duties || [], (t) => [short(t.name, 60),
				short(t.holder, 80), String(t.token),
				when(t.expires_at)])));
}
