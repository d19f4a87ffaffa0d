/*
 * pgjob web: the leased tasks and the cluster's duties (#/tasks).
 */
import {h, region, section, short, table, when} from '/dom.js';
import {main} from '/core.js';

export function tasksPage(p) {
	const out = region('tasks');
	p.always = true; /* "in 21 s" moves on */
	main.append(h('h1', null, 'Tasks and duties'), out);
	p.url = () => '/api/tasks';
	p.render = (d) => out.replaceChildren(
		section('Leased tasks', table(['task', 'partition', 'holder',
			'fencing token', 'lease expires', ''],
		(d.tasks || []).map((t) => [short(t.name, 60),
			String(t.partition), short(t.holder, 80), String(t.token),
			when(t.expires_at), t.expired ? h('span', {
				class: 'badge st-dead'}, 'expired') : '']))),
		section('Cluster duties', table(['duty', 'holder',
			'fencing token', 'lease expires'], (d.duties || []).map(
			(t) => [short(t.name, 60), short(t.holder, 80),
				String(t.token), when(t.expires_at)]))));
}
