/*
 * pgjob web: the schedules (#/schedules): run now, enable, disable.
 */
import {h, region, short, showText, time, when} from '/dom.js';
import {act, main, operator} from '/core.js';
import {at, sortedTable} from '/sort.js';

/* The schedules' columns: [key, label, what it sorts by]. */
const COLS = [
	['name', 'name', (s) => s.name],
	['cron', 'cron', (s) => s.cron],
	['kind', 'kind', (s) => s.kind],
	['queue', 'queue', (s) => s.queue],
	['timezone', 'time zone', (s) => s.timezone],
	['enabled', 'enabled', (s) => s.enabled ? 1 : 0],
	['last', 'last tick', (s) => at(s.last_tick)],
	['next', 'next tick', (s) => at(s.next_tick)],
	['requested', 'run requested', (s) => at(s.run_requested_at)],
];

export function schedulesPage(p) {
	const out = region('schedules');
	p.always = true; /* "in 21 s" moves on */
	main.append(h('h1', null, 'Schedules'), out);
	p.url = () => '/api/schedules';
	p.render = (d) => {
		const op = operator();
		out.replaceChildren(sortedTable(p, 'sort', COLS.concat(op ?
			[['actions', 'actions', null]] : []), d.schedules || [],
		(s) => [short(s.name, 60),
			h('code', null, showText(s.cron, false)),
			short(s.kind, 60), short(s.queue, 40),
			short(s.timezone, 40), s.enabled ? 'yes' : h('span', {
				class: 'badge paused'}, 'disabled'),
			when(s.last_tick), when(s.next_tick),
			time(s.run_requested_at)].concat(op ? [h('div', {
			class: 'cellacts'}, h('button', {type: 'button',
			'data-action': 'run', 'data-key': 'run-' + s.name,
			onclick: () => act('/api/schedules/run', {name: s.name},
				() => 'Schedule ' + s.name + ' will run at the ' +
				'scheduler\'s next turn.')}, 'Run now'),
		h('button', {type: 'button', 'data-action': s.enabled ?
			'disable' : 'enable', 'data-key': 'enable-' + s.name,
		onclick: () => act('/api/schedules/enable', {name: s.name,
			enabled: !s.enabled}, () => 'Schedule ' + s.name +
			(s.enabled ? ' disabled.' : ' enabled.'))},
		s.enabled ? 'Disable' : 'Enable'))] : [])));
	};
}
