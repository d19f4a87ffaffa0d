/*
 * pgjob web: the console's single page (docs/console.md), its entry: the
 * session and the login form, the hash routes and the page each draws,
 * and the browser's events.  A native ES module (index.html loads it with
 * type="module"); each concern is a module of its own,
 * imported from this origin alone (the Content-Security-Policy's
 * script-src 'self'):
 *
 *   dom.js       building the document; hostile text shown as text
 *   core.js      the server (fetch, the CSRF token), the banner, the live
 *                updates and their timer
 *   charts.js    the SVG line charts
 *   keys.js      the keyboard's shortcuts, and their help (?)
 *   theme.js     the light/dark switch
 *   sort.js      the lists' order, by a column's header
 *   suggest.js   the names the queue and kind filters suggest
 *   overview.js, jobs.js (with filters.js, pager.js, bulk.js), job.js,
 *   queues.js, history.js, schedules.js, tasks.js, workflows.js: a page each
 *
 * Hash routes (#/, #/jobs?..., #/job/ID, #/queues, #/schedules, #/tasks,
 * #/workflows, #/workflow/ID, #/dead, #/history?queue=&kind=&range=),
 * each a function that builds the page's fixed parts (forms, buttons)
 * once and gives a url and a render function for its data (core.js
 * refreshes it).
 *
 * For a read-only user the page draws no action at all; the server checks
 * the role anyway.
 */
import {h, showText} from '/dom.js';
import {get, hooks, keepToken, liveBar, main, notFound, parseHash, post,
	refresh, S, say, sayError, tick, title, token} from '/core.js';
import {overviewPage} from '/overview.js';
import {jobsPage} from '/jobs.js';
import {jobPage} from '/job.js';
import {queuesPage} from '/queues.js';
import {historyPage} from '/history.js';
import {schedulesPage} from '/schedules.js';
import {tasksPage} from '/tasks.js';
import {workflowPage, workflowsPage} from '/workflows.js';
import {themeSwitch} from '/theme.js';
import {keyboard} from '/keys.js';

const PAGES = [
	['', 'Overview'], ['jobs', 'Jobs'], ['queues', 'Queues'],
	['schedules', 'Schedules'], ['tasks', 'Tasks'],
	['workflows', 'Workflows'], ['dead', 'Dead jobs'],
];

/* --- session and login ----------------------------------------- */

/* The session of the cookie, with the token this origin kept; or, with
 * none kept, or one that is not the session's (the server answers
 * that with a new session), or fresh, a new session and its token. */
async function session(fresh) {
	const kept = fresh ? '' : token();
	const s = (await get('/api/session' + (kept ? '' :
		'?new=1'))).data;
	if (s.csrf)
		keepToken(s.csrf);
	else
		s.csrf = kept;
	return s;
}

async function start() {
	try {
		S.session = null;
		S.session = await session(false);
	} catch (e) {
		S.session = null;
		drawWho();
		main.replaceChildren(h('h1', null, 'pgjob console'),
			h('p', null, 'The session could not be read.'));
		sayError(e, 'session');
		return;
	}
	drawWho();
	if (S.session.login_required && !S.session.user)
		loginPage();
	else
		route();
}

function drawWho() {
	const who = document.getElementById('who');
	const s = S.session;
	const nav = document.getElementById('nav');
	nav.replaceChildren();
	who.replaceChildren();
	if (!s || (s.login_required && !s.user))
		return;
	nav.appendChild(h('ul', null, PAGES.map(([name, label]) =>
		h('li', null, h('a', {href: '#/' + name,
			'data-page': name}, label)))));
	who.appendChild(h('span', {class: 'db', title: 'database'},
		showText(s.database || '', false)));
	who.appendChild(h('span', {class: 'user', id: 'user'},
		showText(s.user === null || s.user === '' ? 'anonymous' :
			s.user, false)));
	who.appendChild(h('span', {class: 'role role-' + (s.role ===
		'operator' ? 'operator' : 'ro'), id: 'role'},
		s.role || ''));
	if (s.login_required)
		who.appendChild(h('button', {type: 'button', id: 'logout',
			onclick: logout}, 'Log out'));
}

function loginPage() {
	S.page = null;
	const user = h('input', {id: 'login-user', name: 'user',
		autocomplete: 'username', required: 'required'});
	const pass = h('input', {id: 'login-password', name: 'password',
		type: 'password', autocomplete: 'current-password',
		required: 'required'});
	const form = h('form', {class: 'login', id: 'login'},
		h('h1', null, 'pgjob console'),
		h('p', {class: 'muted'}, 'Database ',
			showText(S.session.database || '', false),
			', pgjob ', showText(S.session.version || '', false)),
		h('label', {for: 'login-user'}, 'User'), user,
		h('label', {for: 'login-password'}, 'Password'), pass,
		h('button', {type: 'submit', class: 'primary'}, 'Log in'));
	form.addEventListener('submit', async (ev) => {
		ev.preventDefault();
		const body = {user: user.value, password: pass.value};
		try {
			let r;
			try {
				r = await post('/api/login', body);
			} catch (e) {
				/* The session or token this form had is not the
				 * server's any more (a restart, another tab): once
				 * more with a new one. */
				if (e.status !== 403)
					throw e;
				S.session = await session(true);
				r = await post('/api/login', body);
			}
			keepToken(r.data.csrf);
			S.session = r.data;
			say('', '');
			drawWho();
			route();
		} catch (e) {
			pass.value = '';
			if (e.status === 429)
				say('error', 'Too many failed logins: try again in ' +
					(e.retryAfter || 'a few') + ' seconds.', 'login');
			else if (e.status === 401)
				say('error', 'Wrong user or password.', 'login');
			else
				sayError(e, 'login');
		}
	});
	main.replaceChildren(form);
	user.focus();
}

async function logout() {
	try {
		await post('/api/logout', {});
	} catch (e) {
		sayError(e, 'action');
	}
	keepToken('');
	start();
}

/* The pages by the first part of the hash. */
const routes = {
	'': overviewPage,
	jobs: (p) => jobsPage(p, false),
	dead: (p) => jobsPage(p, true),
	job: jobPage,
	queues: queuesPage,
	history: historyPage,
	schedules: schedulesPage,
	tasks: tasksPage,
	workflows: workflowsPage,
	workflow: workflowPage,
};

/*
 * A page object: {r (the parsed hash), url () -> the data's path,
 * render (data), last (the last answer's text), always (redraw even
 * when the answer did not change: relative times)}.  The route function
 * builds the fixed parts into main and sets url and render.
 */
function route() {
	if (!S.session || (S.session.login_required && !S.session.user))
		return;
	const r = parseHash();
	const fn = Object.hasOwn(routes, r.name) ? routes[r.name] : notFound;
	const page = {r: r, url: null, render: null, last: null,
		busy: false};
	S.page = page;
	for (const a of document.querySelectorAll('#nav a'))
		a.setAttribute('aria-current', a.getAttribute('data-page') ===
			(r.name === 'job' ? 'jobs' : r.name === 'workflow' ?
				'workflows' : r.name) ? 'page' : 'false');
	if (S.bannerKind !== 'action')
		say('', '');
	main.replaceChildren();
	fn(page);
	const h1 = main.querySelector('h1');
	title(h1 ? h1.textContent : '');
	if (page.url)
		main.insertBefore(liveBar(page), main.children[1] || null);
	refresh(true);
}

/* --- the browser's events, start -------------------------------- */

window.addEventListener('hashchange', () => {
	route();
	const r = parseHash();
	if (r.name === 'jobs' && r.q.get('focus')) {
		const box = document.getElementById('f-q');
		if (box)
			box.focus();
	} else {
		main.focus({preventScroll: true});
	}
});

document.addEventListener('visibilitychange', () => {
	if (document.visibilityState === 'visible')
		refresh(false);
});

/* A new width redraws at the next refresh (the chart sizes itself). */
window.addEventListener('resize', () => {
	if (S.page)
		S.page.last = null;
});

document.querySelector('header.top').appendChild(themeSwitch());
keyboard();
hooks.start = start;
hooks.route = route;
tick();
start();
