/*
 * pgjob web: the console's single page (docs/console.md).
 *
 * Hash routes (#/, #/jobs?..., #/job/ID, #/queues, #/schedules, #/tasks,
 * #/workflows, #/workflow/ID, #/dead, #/history?queue=&kind=&range=),
 * each a function that builds the
 * page's fixed parts (forms, buttons) once and gives a url and a render
 * function for its data.  Every 2 s (or 10, 30: the live bar, which also
 * pauses) while the tab is visible the current page's url is fetched
 * again; when the answer changed, only the data part is rebuilt, so an
 * open form, the selection, the scroll position and the focused control
 * survive a refresh; while the user selects text in the page or moves the
 * pointer over its data, the redraw waits (holding()).  The bar says when
 * the data shown was read, and marks it stale while the server fails.
 *
 * Everything an application or a handler wrote (kinds, queues, payloads,
 * errors, keys, step names) is hostile: it reaches the document only as
 * text (textContent, createTextNode, setAttribute of a fixed attribute),
 * never as markup; control and invisible characters are shown as \uXXXX
 * (showText).  Nothing here uses innerHTML.
 *
 * Every request carries the session's token (X-CSRF-Token), and every
 * POST Content-Type: application/json; the server checks both and the
 * role.  The token comes only in the answer that makes a session (a login,
 * GET /api/session?new=1), never to a request with only the cookie, which
 * a page of any other port of this host is sent too: the page keeps it in
 * localStorage, which is this origin's alone (its port included), so that
 * a reload and the console's other tabs have it (docs/security.md).
 * For a read-only user the page draws no action at all.
 */
'use strict';

(function () {
	/* The live updates' periods (the first by default), in ms. */
	const PERIODS = [2000, 10000, 30000];
	const SHOW_MAX = 100000; /* characters of a document shown before "show all" */
	const STATES = ['available', 'running', 'waiting', 'done', 'dead',
		'cancelled'];
	/* What the jobs' filter takes: the states, and two kinds of available
	 * jobs (due later; due again after a failed attempt). */
	const FILTER_STATES = STATES.concat(['scheduled', 'retrying']);
	const PAGES = [
		['', 'Overview'], ['jobs', 'Jobs'], ['queues', 'Queues'],
		['schedules', 'Schedules'], ['tasks', 'Tasks'],
		['workflows', 'Workflows'], ['dead', 'Dead jobs'],
	];

	const TOKEN_KEY = 'pgjob_csrf';

	function token() {
		try {
			return localStorage.getItem(TOKEN_KEY) || '';
		} catch (e) {
			return '';
		}
	}

	function keepToken(t) {
		try {
			if (t)
				localStorage.setItem(TOKEN_KEY, t);
			else
				localStorage.removeItem(TOKEN_KEY);
		} catch (e) {
			/* storage off: this page's life only (S.session.csrf) */
		}
	}

	const S = {
		session: null, /* GET /api/session */
		page: null,    /* the current page: see route() */
		bannerKind: '',
		live: true,    /* live updates on (the Pause button) */
		period: PERIODS[0],
		trail: [],     /* the hashes the Older buttons left, for Newer */
	};
	const main = document.getElementById('main');
	const banner = document.getElementById('banner');

	/* --- building the document ------------------------------------- */

	/*
	 * h('tag', {attr: value, onclick: fn, text: 'x'}, child, ...): an
	 * element; strings among the children become text nodes.  Attribute
	 * values go through setAttribute (an attribute is never markup).
	 */
	function h(tag, props, ...kids) {
		return build(document.createElement(tag), props, kids);
	}

	function svg(tag, props, ...kids) {
		return build(document.createElementNS(
			'http://www.w3.org/2000/svg', tag), props, kids);
	}

	function build(e, props, kids) {
		for (const k in props || {}) {
			const v = props[k];
			if (v === null || v === undefined || v === false)
				continue;
			if (k === 'text')
				e.textContent = v;
			else if (k === 'class')
				e.setAttribute('class', v);
			else if (k.startsWith('on'))
				e.addEventListener(k.slice(2), v);
			else if (typeof v === 'boolean')
				e[k] = v;
			else
				e.setAttribute(k, String(v));
		}
		append(e, kids);
		return e;
	}

	function append(e, kids) {
		for (const k of kids.flat(Infinity)) {
			if (k === null || k === undefined || k === false)
				continue;
			e.appendChild(typeof k === 'object' ? k
				: document.createTextNode(String(k)));
		}
		return e;
	}

	/* Characters that would hide or disguise text: C0/C1 controls, DEL,
	 * zero-width and bidirectional controls, separators. */
	const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;
	const HIDDEN_ML = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

	/*
	 * s as text nodes, each hidden character drawn as a marked \uXXXX
	 * (multiline: newlines and tabs kept).  U+FFFD, which the server puts
	 * for invalid UTF-8, shows as itself.
	 */
	function showText(s, multiline) {
		const f = document.createDocumentFragment();
		if (s === null || s === undefined)
			return f;
		s = String(s);
		const re = multiline ? HIDDEN_ML : HIDDEN;
		let run = '';
		for (const c of s) {
			if (re.test(c)) {
				if (run)
					f.appendChild(document.createTextNode(run));
				run = '';
				const hex = c.codePointAt(0).toString(16)
					.padStart(4, '0');
				f.appendChild(h('span', {class: 'esc',
					title: 'hidden character'}, '\\u' + hex));
			} else {
				run += c;
			}
		}
		if (run)
			f.appendChild(document.createTextNode(run));
		return f;
	}

	/* A one-line cell: at most n characters, the whole in a title. */
	function short(s, n) {
		if (s === null || s === undefined)
			return '';
		s = String(s);
		const cut = s.length > n ? s.slice(0, n) + '\u2026' : s;
		return h('span', {title: s.length > n ? s.slice(0, 2000) : null},
			showText(cut, false));
	}

	function fmtTime(t) {
		if (!t)
			return '';
		const d = new Date(t);
		if (isNaN(d))
			return String(t);
		const p = (n) => String(n).padStart(2, '0');
		return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' +
			p(d.getDate()) + ' ' + p(d.getHours()) + ':' +
			p(d.getMinutes()) + ':' + p(d.getSeconds());
	}

	function time(t) {
		return t ? h('time', {datetime: t, title: t}, fmtTime(t)) : '';
	}

	/* t, and how far from now it is ("in 21 s", "3 min ago"): the
	 * browser's clock. */
	function when(t) {
		if (!t)
			return '';
		const d = (new Date(t) - Date.now()) / 1000;
		if (isNaN(d))
			return time(t);
		return h('span', {class: 'when'}, time(t), h('span', {
			class: 'muted'}, d >= 0 ? ' in ' + fmtSecs(d) : ' ' +
			fmtSecs(-d) + ' ago'));
	}

	function fmtSecs(s) {
		if (s === null || s === undefined || s === '')
			return '';
		s = Number(s);
		if (s < 60)
			return s.toFixed(s < 10 ? 1 : 0) + ' s';
		if (s < 3600)
			return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
		if (s < 86400)
			return Math.floor(s / 3600) + ' h ' +
				Math.floor(s % 3600 / 60) + ' min';
		return Math.floor(s / 86400) + ' d ' +
			Math.floor(s % 86400 / 3600) + ' h';
	}

	function num(n) {
		return n === null || n === undefined ? '' : Number(n)
			.toLocaleString('en-US');
	}

	/* A queue's count k: "10,000+" when the server stopped counting
	 * (the field is in at_least). */
	function count(q, k) {
		const more = Array.isArray(q.at_least) && q.at_least.includes(k);
		if (Array.isArray(q.estimated) && q.estimated.includes(k))
			return h('span', {title: 'counted among the first 10,000 ' +
				'due jobs: near, not exact'}, '\u2248 ' + num(q[k]));
		return more ? h('span', {title: 'at least: counting stops there'},
			num(q[k]) + '+') : num(q[k]);
	}

	function wait(q) {
		const s = fmtSecs(q.oldest_wait_seconds);
		return Array.isArray(q.at_least) && q.at_least.includes(
			'oldest_wait_seconds') && s ? '\u2265 ' + s : s;
	}

	function badge(state) {
		return h('span', {class: 'badge st-' + (STATES.includes(state) ?
			state : 'other')}, showText(state, false));
	}

	function jobLink(id) {
		return h('a', {href: '#/job/' + Number(id)}, String(id));
	}

	/* A table: heads, then rows of cells (a cell: text or a node). */
	function table(heads, rows, cls) {
		return h('div', {class: 'scroll'}, h('table', {class: cls || null},
			h('thead', null, h('tr', null, heads.map((x) =>
				h('th', {scope: 'col'}, x)))),
			h('tbody', null, rows.length ? rows.map((r) => h('tr', null,
				r.map((c, i) => h('td', {'data-label': typeof heads[i] ===
					'string' && heads[i] ? heads[i] : null}, c)))) :
				h('tr', null,
				h('td', {colspan: heads.length, class: 'muted'},
					'nothing')))));
	}

	function dl(pairs, cls) {
		return h('dl', {class: cls || 'kv'}, pairs.map(([k, v]) =>
			h('div', null, h('dt', null, k), h('dd', null, v))));
	}

	function section(title, ...kids) {
		return h('section', null, h('h2', null, title), kids);
	}

	function operator() {
		return S.session && S.session.role === 'operator';
	}

	/* --- talking to the server ------------------------------------- */

	class ApiError extends Error {
		constructor(status, message, retryAfter, data) {
			super(message);
			this.status = status;
			this.retryAfter = retryAfter;
			this.data = data;
		}
	}

	/* GET or POST path: {text, data}; a 4xx/5xx answer throws ApiError
	 * with the server's {"error"} text. */
	async function call(method, path, body) {
		const opt = {method: method, credentials: 'same-origin',
			headers: {Accept: 'application/json'}};
		const t = S.session && S.session.csrf ? S.session.csrf : token();
		if (t)
			opt.headers['X-CSRF-Token'] = t;
		if (method === 'POST') {
			opt.headers['Content-Type'] = 'application/json';
			opt.body = JSON.stringify(body || {});
		}
		let r;
		try {
			r = await fetch(path, opt);
		} catch (e) {
			throw new ApiError(0, 'the console server does not answer (' +
				e.message + ')');
		}
		const text = await r.text();
		let data = null;
		try {
			data = JSON.parse(text);
		} catch (e) {
			data = null;
		}
		if (!r.ok) {
			const msg = data && typeof data.error === 'string' ?
				data.error : 'HTTP ' + r.status;
			/* The session is gone, or its token is not the one kept
			 * (the server restarted): a new one (and the login form,
			 * with users). */
			if (path !== '/api/login' && (r.status === 401 ||
				(r.status === 403 && /X-CSRF-Token/.test(msg)))) {
				keepToken('');
				S.session = null;
				setTimeout(start, 0);
			}
			throw new ApiError(r.status, msg,
				r.headers.get('Retry-After'), data);
		}
		if (data === null)
			throw new ApiError(r.status, 'the answer is not JSON');
		return {text: text, data: data};
	}

	const get = (path) => call('GET', path);
	const post = (path, body) => call('POST', path, body);

	function query(obj) {
		const q = new URLSearchParams();
		for (const k in obj)
			if (obj[k] !== null && obj[k] !== undefined && obj[k] !== '')
				q.set(k, obj[k]);
		const s = q.toString();
		return s ? '?' + s : '';
	}

	/* --- the banner: errors (and what an action did) ---------------- */

	function say(kind, message, from) {
		banner.replaceChildren(h('span', {class: 'msg'},
			showText(message, false)), h('button', {type: 'button',
			class: 'close', 'aria-label': 'Dismiss',
			onclick: () => say('', '')}, '\u00d7'));
		banner.className = 'banner ' + kind;
		banner.hidden = !message;
		S.bannerKind = message ? from || kind : '';
	}

	function sayError(e, from) {
		say('error', e && e.message ? e.message : String(e), from);
	}

	/* Runs an action; its answer (or error) in the banner, then the page
	 * refreshes. */
	async function act(path, body, done) {
		try {
			const r = await post(path, body);
			say('info', done(r.data));
		} catch (e) {
			sayError(e, 'action');
		}
		refresh(true);
	}

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

	/* --- routing and the live refresh ------------------------------ */

	function parseHash() {
		return parseHashOf(location.hash);
	}

	function parseHashOf(hash) {
		let s = hash.replace(/^#\/?/, '');
		const qi = s.indexOf('?');
		const q = new URLSearchParams(qi >= 0 ? s.slice(qi + 1) : '');
		if (qi >= 0)
			s = s.slice(0, qi);
		const parts = s.split('/');
		return {name: parts[0] || '', arg: parts[1] || '', q: q};
	}

	const routes = {};

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

	/* The tab's title: the page's, so that tabs and history tell apart. */
	function title(t) {
		document.title = (t ? t + ' \u00b7 ' : '') + 'pgjob console';
	}

	/*
	 * The live updates' bar: when the page's data was read ("as of", and
	 * marked stale while the server fails), why it is held (a selection,
	 * the pointer on the data), Pause/Resume and the period.
	 */
	function liveBar(p) {
		p.stamp = h('span', {id: 'as-of', class: 'muted'}, '');
		const pause = h('button', {type: 'button', id: 'live-toggle',
			class: 'link', onclick: () => {
				S.live = !S.live;
				pause.textContent = S.live ? 'Pause' : 'Resume';
				if (S.live)
					refresh(false);
				drawStamp(p);
			}}, S.live ? 'Pause' : 'Resume');
		const every = h('select', {id: 'live-period',
			'aria-label': 'update every'}, PERIODS.map((ms) =>
			h('option', {value: ms, selected: ms === S.period},
				'every ' + ms / 1000 + ' s')));
		every.addEventListener('change', () => {
			S.period = Number(every.value);
			tick();
		});
		return h('div', {class: 'livebar', id: 'live'}, p.stamp, ' ',
			pause, ' ', every);
	}

	function drawStamp(p) {
		if (!p.stamp)
			return;
		const at = p.asOf ? fmtTime(p.asOf).slice(11) : '\u2013';
		let t;
		if (p.stale)
			t = 'Stale: as of ' + at + ' (the server fails: ' + p.stale +
				')';
		else if (!S.live)
			t = 'Paused; as of ' + at;
		else if (p.held)
			t = 'As of ' + at + '; held while you select or point at it';
		else
			t = 'Updated ' + at;
		p.stamp.textContent = t;
		p.stamp.className = p.stale ? 'stale' : 'muted';
		main.classList.toggle('is-stale', !!p.stale);
	}

	/* Whether the user holds part of the page that a redraw would take
	 * away: a text selection in it, or the pointer moving on its data in
	 * the last HOLD_MS (a row would move under it, a chart's tooltip
	 * close); a pointer left at rest lets the updates through. */
	const HOLD_MS = 3000;
	const pointer = {at: 0, el: null};
	document.addEventListener('mousemove', (ev) => {
		pointer.at = Date.now();
		pointer.el = ev.target;
	});

	function holding() {
		const sel = getSelection();
		if (sel && !sel.isCollapsed && sel.rangeCount &&
			main.contains(sel.getRangeAt(0).commonAncestorContainer))
			return true;
		return Date.now() - pointer.at < HOLD_MS && pointer.el &&
			pointer.el.isConnected && !!pointer.el.closest('.region');
	}

	/*
	 * Fetches the current page's data; draws it when it changed (force:
	 * always).  The focused control is found again after the redraw by
	 * its data-key.
	 */
	async function refresh(force) {
		const p = S.page;
		if (!p || !p.url)
			return;
		if (p.busy) {
			/* After the answer in flight, which may predate an action. */
			p.again = p.again || force;
			return;
		}
		if (!force && !S.live)
			return;
		p.busy = true;
		try {
			const r = p.fetch ? await p.fetch() : await get(p.url());
			if (p !== S.page)
				return;
			if (S.bannerKind === 'refresh')
				say('', '');
			p.stale = '';
			const same = !p.always && r.text === p.last;
			/* Read, not drawn: "as of" stays the time of what shows. */
			p.held = !force && !same && holding();
			if (!p.held)
				p.asOf = new Date().toISOString();
			drawStamp(p);
			if (!force && (same || p.held))
				return;
			p.last = r.text;
			const focused = document.activeElement &&
				document.activeElement.getAttribute('data-key');
			p.render(r.data);
			if (focused) {
				const again = main.querySelector('[data-key="' +
					CSS.escape(focused) + '"]');
				if (again)
					again.focus({preventScroll: true});
			}
		} catch (e) {
			if (p === S.page && p.missing && e.status === 404) {
				/* No such job: said once, no more asking. */
				p.url = null;
				p.fetch = null;
				p.missing(e);
			} else if (p === S.page && e.status !== 401) {
				sayError(e, 'refresh');
				if (p.asOf) {
					p.stale = e.message;
					drawStamp(p);
				}
			}
		} finally {
			p.busy = false;
			if (p.again && p === S.page) {
				p.again = false;
				refresh(true);
			}
		}
	}

	function notFound(p) {
		main.append(h('h1', null, 'Not found'),
			h('p', null, h('a', {href: '#/'}, 'To the overview')));
	}

	/* A region rebuilt at each refresh. */
	function region(id) {
		return h('div', {id: id, class: 'region', 'aria-live': 'off'});
	}

	/* --- overview --------------------------------------------------- */

	routes[''] = function (p) {
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
	};

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
					'statistics): the queues\' counts stop at 10,000'},
				'\u2248 ' + num(Math.max(Math.round(est[k]), sum[k])));
			if (more[k])
				return h('span', {title: 'at least'}, '\u2265 ' +
					num(sum[k]));
			if (near[k])
				return h('span', {title: 'counted among the first ' +
					'10,000 due jobs of a queue: near, not exact'},
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
			'queues\' counts stop at 10,000.') : null);
	}

	/* The rates (per minute, oldest first) as jobs per second: an SVG of
	 * three lines, done, failed and retried. */
	function chart(rates) {
		/* As wide as the page allows (up to 720), so that its labels keep
		 * their size on a phone. */
		const W = Math.max(300, Math.min(720, main.clientWidth - 40));
		const H = 200, L = 44, R = 8, T = 10, B = 24;
		const series = ['done', 'failed', 'retried'];
		let max = 0;
		for (const r of rates)
			for (const k of series)
				max = Math.max(max, Number(r[k] || 0) / 60);
		const top = niceMax(max);
		const n = Math.max(rates.length, 2);
		const x = (i) => L + (W - L - R) * i / (n - 1);
		const y = (v) => T + (H - T - B) * (1 - v / top);
		const g = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'chart',
			role: 'img', 'aria-label': 'done, failed and retried jobs per ' +
			'second over the last hour'});
		for (const f of [0, 0.5, 1]) {
			g.appendChild(svg('line', {x1: L, x2: W - R, y1: y(top * f),
				y2: y(top * f), class: 'grid'}));
			g.appendChild(svg('text', {x: L - 4, y: y(top * f) + 4,
				class: 'axis', 'text-anchor': 'end'}, fmtRate(top * f, top)));
		}
		const first = rates.length ? new Date(rates[0].at) : null;
		[[0, first ? fmtTime(rates[0].at).slice(11, 16) : '-60 min'],
			[n - 1, 'now']].forEach(([i, label], j) =>
			g.appendChild(svg('text', {x: x(i), y: H - 6, class: 'axis',
				'text-anchor': j ? 'end' : 'start'}, label)));
		for (const k of series) {
			const pts = rates.map((r, i) => x(i).toFixed(1) + ',' +
				y(Number(r[k] || 0) / 60).toFixed(1)).join(' ');
			if (rates.length)
				g.appendChild(svg('polyline', {points: pts,
					class: 'line ' + k}));
		}
		/* One invisible column per minute, its figures in a tooltip. */
		rates.forEach((r, i) => g.appendChild(svg('rect', {
			x: x(i) - (W - L - R) / n / 2, y: T, width: (W - L - R) / n,
			height: H - T - B, class: 'hit'}, svg('title', null,
			fmtTime(r.at) + ': done ' + num(r.done) + ', failed ' +
			num(r.failed) + ', retried ' + num(r.retried) +
			' (per minute)'))));
		const legend = h('p', {class: 'legend'}, series.map((k) =>
			h('span', {class: 'key ' + k}, k)), rates.length ? null :
			h('span', {class: 'muted'}, ' (no figures yet)'));
		return h('figure', {class: 'chartbox'}, g, legend);
	}

	function niceMax(v) {
		if (!(v > 0))
			return 1;
		const e = Math.pow(10, Math.floor(Math.log10(v)));
		for (const m of [1, 2, 2.5, 5, 10])
			if (v <= m * e)
				return m * e;
		return 10 * e;
	}

	/* v with the decimals that the axis's top needs. */
	function fmtRate(v, top) {
		return v.toFixed(top >= 10 ? 0 : top >= 1 ? 1 : 2);
	}

	function queueLink(q) {
		return h('a', {href: '#/jobs?queue=' + encodeURIComponent(q)},
			showText(q, false));
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

	/* --- jobs and dead jobs ---------------------------------------- */

	const FILTERS = ['state', 'queue', 'kind', 'q', 'from', 'to',
		'limit_key', 'ordering_key', 'workflow'];

	routes.jobs = (p) => jobsPage(p, false);
	routes.dead = (p) => jobsPage(p, true);

	/* datetime-local <-> RFC 3339 (the hash and the API hold the latter). */
	function toLocalInput(iso) {
		const d = new Date(iso);
		if (!iso || isNaN(d))
			return '';
		const p = (n) => String(n).padStart(2, '0');
		return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' +
			p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes());
	}

	function fromLocalInput(v) {
		const d = new Date(v);
		return v && !isNaN(d) ? d.toISOString() : '';
	}

	function jobsPage(p, dead) {
		const f = {};
		for (const k of FILTERS)
			f[k] = p.r.q.get(k) || '';
		if (dead)
			f.state = 'dead';
		p.sel = new Set();
		/* The page's position is in the address (a reload, Back). */
		p.before = /^[0-9]+$/.test(p.r.q.get('before') || '') ?
			p.r.q.get('before') : '';
		p.limit = 50;
		p.dead = dead;

		const form = filterForm(f, dead);
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
			{before: p.before, limit: p.limit}));
		p.fetch = () => fetchJobs(p, f, pager);
		p.render = (d) => {
			out.replaceChildren(jobsTable(p, d.jobs || [], d));
			drawPager(p, d, pager);
			drawCount(p, count);
			drawMatches(d, matches);
		};
		p.count = count;
	}

	/* The filter's terms that are set (the dead jobs' view: its state). */
	function filterOf(f) {
		const filter = {};
		for (const k of FILTERS)
			if (f[k])
				filter[k] = f[k];
		return filter;
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
	async function fetchJobs(p, f, pager) {
		const t0 = Date.now();
		let jobs = [], before = p.before, d;
		for (;;) {
			d = (await get('/api/jobs' + query(Object.assign({}, f, {
				before: before, limit: p.limit - jobs.length})))).data;
			jobs = jobs.concat(d.jobs || []);
			if (jobs.length >= p.limit || d.searched_to === null ||
				d.searched_to === undefined || p !== S.page ||
				Date.now() - t0 > 4000)
				break;
			before = String(d.searched_to);
			pager.replaceChildren(h('span', {class: 'muted',
				id: 'searching'}, 'Searching older jobs\u2026 (' +
				num(jobs.length) + ' found, down to job ' +
				num(d.searched_to) + ')'));
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

	function cap(s) {
		return s.charAt(0).toUpperCase() + s.slice(1);
	}

	function filterForm(f, dead) {
		const field = (k, label, input) => h('div', {class: 'field'},
			h('label', {for: 'f-' + k}, label), input);
		const text = (k, label, ph) => field(k, label, h('input', {
			id: 'f-' + k, name: k, value: f[k], placeholder: ph || null,
			type: k === 'workflow' ? 'number' : 'text'}));
		const date = (k, label) => field(k, label, h('input', {
			id: 'f-' + k, name: k, type: 'datetime-local',
			value: toLocalInput(f[k])}));
		const state = dead ? null : field('state', 'State', h('select', {
			id: 'f-state', name: 'state'}, h('option', {value: ''}, 'any'),
		FILTER_STATES.map((s) => h('option', {value: s,
			selected: s === f.state}, s))));
		const form = h('form', {class: 'filters', id: 'filters',
			role: 'search'}, state, text('queue', 'Queue'),
		text('kind', 'Kind'), text('q', 'Text in payload or error',
			'press / to search'), dead ? null : [date('from',
			'Created from'), date('to', 'Created to'),
		text('limit_key', 'Limit key'), text('ordering_key',
			'Ordering key'), text('workflow', 'Workflow')],
		h('div', {class: 'field buttons'},
			h('button', {type: 'submit', class: 'primary'}, 'Filter'),
			h('button', {type: 'button', onclick: () => {
				location.hash = dead ? '#/dead' : '#/jobs';
			}}, 'Clear')));
		form.addEventListener('submit', (ev) => {
			ev.preventDefault();
			const v = {};
			for (const k of FILTERS) {
				const e = form.elements.namedItem(k);
				if (!e)
					continue;
				v[k] = e.type === 'datetime-local' ?
					fromLocalInput(e.value) : e.value.trim();
			}
			const target = (dead ? '#/dead' : '#/jobs') + query(v);
			if (location.hash === target)
				route();
			else
				location.hash = target;
		});
		return form;
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
			d && d.searched_to ? 'No match among the jobs newer than ' +
				'job ' + num(d.searched_to) + ' yet: search older, ' +
				'below.' : 'No job matches.')));
		t.appendChild(body);
		return h('div', {class: 'scroll'}, t);
	}

	function drawCount(p, el) {
		if (el)
			el.textContent = p.sel.size ? p.sel.size + ' selected' : '';
	}

	/*
	 * Newer, Older, Search older.  The jobs' pages keep their position in
	 * the address ("before"), so that a reload and Back stay there; the
	 * workflows' page keeps it in p.cursors.
	 */
	function drawPager(p, d, pager) {
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

	const PAST = {retry: 'retried', cancel: 'cancelled', delete: 'deleted'};

	function bulkSelected(p, a) {
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
	 * "... all matching": the exact count first, in the confirmation (any
	 * action, a retry too); then the action, STEP jobs a request, its
	 * progress in the banner and the list's buttons disabled until it
	 * ends.
	 */
	async function bulkAll(p, f, a) {
		const filter = filterOf(f);
		const buttons = [...document.querySelectorAll('#bulk button')];
		const busy = (on) => buttons.forEach((b) => {
			b.disabled = on;
		});
		let n, again = '';
		busy(true);
		say('info', 'Counting the jobs that match\u2026', 'action');
		try {
			n = (await get('/api/jobs/count' + query(filter))).data.count;
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
			let done = 0, before = null;
			try {
				for (;;) {
					say('info', cap(ING[a]) + '\u2026 ' + num(done) +
						' of ' + num(n) + ' jobs', 'action');
					const r = await post('/api/jobs/' + a, Object.assign({
						filter: filter, expect: n - done, limit: STEP},
					before ? {before: before} : {}));
					done += r.data.affected;
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

	/* --- one job ---------------------------------------------------- */

	routes.job = function (p) {
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
	};

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

	/* --- history per queue and kind; a job's timeline -------------- */

	/* (docs/console.md, "Queues".)  #/history?queue=&kind=&range=:
	 * a queue's (or kind's) done, failed and retried per step and its wait
	 * and run times at p50/p95/p99, from /api/history; then a table per
	 * kind over the range. */
	const RANGES = ['1h', '24h', '7d', '30d'];

	routes.history = function (p) {
		const queue = p.r.q.get('queue') || '';
		const kind = p.r.q.get('kind') || '';
		const range = RANGES.includes(p.r.q.get('range')) ?
			p.r.q.get('range') : '1h';
		const go = (k, r) => {
			const q = new URLSearchParams();
			if (queue)
				q.set('queue', queue);
			if (k)
				q.set('kind', k);
			q.set('range', r);
			location.hash = '#/history?' + q.toString();
		};
		const pick = h('select', {id: 'h-range', 'data-key': 'h-range',
			'aria-label': 'range', onchange: (ev) => go(kind,
				ev.target.value)}, RANGES.map((r) => h('option', {value: r,
			selected: r === range}, 'last ' + r)));
		const out = region('history');
		main.append(h('h1', null, 'History ', queue ? showText(queue,
			false) : 'of every queue', kind ? ' \u00b7 ' : '',
		kind ? showText(kind, false) : ''), h('p', null, pick,
			kind ? h('button', {type: 'button', class: 'link',
				onclick: () => go('', range)}, ' every kind') : null), out);
		const q = new URLSearchParams({range: range});
		if (queue)
			q.set('queue', queue);
		if (kind)
			q.set('kind', kind);
		p.url = () => '/api/history?' + q.toString();
		p.render = (d) => out.replaceChildren(...historyView(d, go, range));
	};

	function historyLink(queue) {
		return h('a', {href: '#/history?queue=' + encodeURIComponent(queue) +
			'&range=1h', class: 'muted', title: 'history of ' + queue},
		'history');
	}

	/* A percentile in ms as the console shows it ("\u2264 362 ms"; on an
	 * axis, without the sign). */
	function fmtMs(v, axis) {
		if (v === null || v === undefined)
			return '';
		v = Number(v);
		return (axis ? '' : '\u2264 ') + (v < 1000 ? num(Math.round(v)) + ' ms' :
			v < 120000 ? (v / 1000).toFixed(1) + ' s' :
				fmtSecs(v / 1000));
	}

	function historyView(d, go, range) {
		const rows = d.series || [];
		const step = Number(d.step_seconds) || 60;
		const per = {60: 'minute', 600: '10 minutes', 3600: 'hour',
			21600: '6 hours'}[step] || fmtSecs(step);
		return [
			section('Ended per ' + per, seriesChart(rows,
				['done', 'failed', 'retried'], (v) => num(v),
				'done, failed and retried attempts per ' + per)),
			section('Wait (from due to start)', seriesChart(rows,
				['wait_p50', 'wait_p95', 'wait_p99'], fmtMs,
				'wait time percentiles')),
			section('Run time', seriesChart(rows,
				['run_p50', 'run_p95', 'run_p99'], fmtMs,
				'run time percentiles')),
			section('Per kind', table(['queue', 'kind', 'done', 'failed',
				'retried', 'wait p50', 'wait p95', 'wait p99', 'run p50',
				'run p95', 'run p99'], (d.kinds || []).map((k) => [
				short(k.queue, 60), h('button', {type: 'button',
					class: 'link', onclick: () => go(k.kind, range)},
				showText(String(k.kind).slice(0, 60), false)),
				num(k.done), num(k.failed), num(k.retried),
				fmtMs(k.wait_p50), fmtMs(k.wait_p95), fmtMs(k.wait_p99),
				fmtMs(k.run_p50), fmtMs(k.run_p95), fmtMs(k.run_p99)]),
			'history-kinds'),
			h('p', {class: 'muted note'}, 'A time is the upper bound ' +
				'of its bucket: at most 41 % above the true one.')),
		];
	}

	/* Lines of keys over rows (oldest first), a tooltip per step; a key
	 * is a class of its line (app.css). */
	function seriesChart(rows, keys, fmt, label) {
		const W = Math.max(300, Math.min(720, main.clientWidth - 40));
		const H = 160, L = 64, R = 8, T = 10, B = 24;
		let max = 0;
		for (const r of rows)
			for (const k of keys)
				max = Math.max(max, Number(r[k] || 0));
		const top = niceMax(max);
		const n = Math.max(rows.length, 2);
		const x = (i) => L + (W - L - R) * i / (n - 1);
		const y = (v) => T + (H - T - B) * (1 - v / top);
		const g = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'chart',
			role: 'img', 'aria-label': label});
		for (const f of [0, 0.5, 1]) {
			g.appendChild(svg('line', {x1: L, x2: W - R, y1: y(top * f),
				y2: y(top * f), class: 'grid'}));
			g.appendChild(svg('text', {x: L - 4, y: y(top * f) + 4,
				class: 'axis', 'text-anchor': 'end'}, max ?
				fmt(top * f, true) : ''));
		}
		if (rows.length)
			[[0, fmtTime(rows[0].at).slice(5, 16)], [n - 1, 'now']]
				.forEach(([i, t], j) => g.appendChild(svg('text', {
					x: x(i), y: H - 6, class: 'axis',
					'text-anchor': j ? 'end' : 'start'}, t)));
		for (const k of keys) {
			/* A step without a figure (no attempt) breaks the line. */
			let pts = [];
			const flush = () => {
				if (pts.length)
					g.appendChild(svg('polyline', {points: pts.join(' '),
						class: 'line ' + k.replace(/^(wait|run)_/, '')}));
				pts = [];
			};
			rows.forEach((r, i) => {
				if (r[k] === null || r[k] === undefined)
					return flush();
				pts.push(x(i).toFixed(1) + ',' + y(Number(r[k]))
					.toFixed(1));
			});
			flush();
		}
		rows.forEach((r, i) => g.appendChild(svg('rect', {
			x: x(i) - (W - L - R) / n / 2, y: T, width: (W - L - R) / n,
			height: H - T - B, class: 'hit'}, svg('title', null,
			fmtTime(r.at) + ': ' + keys.map((k) => k.replace(/^(wait|run)_/,
				'') + ' ' + (fmt(r[k]) || '\u2013')).join(', ')))));
		return h('figure', {class: 'chartbox'}, g, h('p', {class: 'legend'},
			keys.map((k) => h('span', {class: 'key ' + k.replace(
				/^(wait|run)_/, '')}, k.replace(/^(wait|run)_/, '')))));
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

	/* --- queues ----------------------------------------------------- */

	/* The keys of pgjob.set_limits(): [key, label, kind]; a rate is
	 * "COUNT/PERIOD" text (10/s, 600/min, 100/10s). */
	const LIMITS = [
		['global_concurrency', 'Concurrency (cluster)', 'n'],
		['per_key_concurrency', 'Concurrency per key', 'n'],
		['rate', 'Rate (e.g. 10/s)', 'rate'],
		['burst', 'Burst', 'n'],
		['rate_per_key', 'Rate per key (e.g. 1/s)', 'rate'],
		['burst_per_key', 'Burst per key', 'n'],
	];

	/* A rate as the set_limits text: 10 per 1000 ms is "10/1000ms". */
	function rateText(n, ms) {
		if (n === null || n === undefined)
			return '';
		ms = Number(ms);
		if (ms % 3600000 === 0)
			return n + '/' + (ms === 3600000 ? '' : ms / 3600000) + 'h';
		if (ms % 60000 === 0)
			return n + '/' + (ms === 60000 ? '' : ms / 60000) + 'min';
		if (ms % 1000 === 0)
			return n + '/' + (ms === 1000 ? '' : ms / 1000) + 's';
		return n + '/' + ms + 'ms';
	}

	routes.queues = function (p) {
		const editor = h('div', {id: 'limits-editor'});
		const out = region('queues');
		main.append(h('h1', null, 'Queues'), editor, out);
		p.url = () => '/api/queues';
		p.render = (d) => out.replaceChildren(queuesTable(d.queues || [],
			editor));
	};

	function limitsText(l) {
		if (!l)
			return h('span', {class: 'muted'}, 'none');
		const s = [];
		if (l.global_concurrency !== null && l.global_concurrency !==
			undefined)
			s.push('concurrency ' + l.global_concurrency);
		if (l.per_key_concurrency !== null && l.per_key_concurrency !==
			undefined)
			s.push(l.per_key_concurrency + ' per key');
		if (l.rate !== null && l.rate !== undefined)
			s.push('rate ' + rateText(l.rate, l.rate_period_ms) +
				(l.burst ? ', burst ' + l.burst : ''));
		if (l.rate_per_key !== null && l.rate_per_key !== undefined)
			s.push(rateText(l.rate_per_key, l.rate_per_key_period_ms) +
				' per key' + (l.burst_per_key ? ', burst ' +
				l.burst_per_key : ''));
		if (l.fair)
			s.push('fair');
		if (l.throttled_until)
			s.push('throttled until ' + fmtTime(l.throttled_until));
		return [s.length ? s.join('; ') : 'none', l.source ?
			h('span', {class: 'muted'}, ' (', showText(l.source, false),
				')') : null];
	}

	function queuesTable(queues, editor) {
		const op = operator();
		return table(['queue', 'available', 'scheduled', 'running',
			'waiting', 'dead', 'done/min', 'failed/min', 'oldest waiting',
			'limits', 'state'].concat(op ? ['actions'] : []), queues.map(
			(q) => [h('span', null, queueLink(q.queue), ' ',
				historyLink(q.queue)), count(q, 'available'),
				count(q, 'scheduled'), count(q, 'running'),
				count(q, 'waiting'),
				count(q, 'dead'), num(q.done_last_minute),
				num(q.failed_last_minute), wait(q),
			limitsText(q.limits), h('div', {class: 'cellacts'},
				q.paused ? h('span', {class: 'badge paused'}, 'paused') :
					h('span', {class: 'muted'}, 'running'),
				(q.paused_kinds || []).map((k) => h('span', {class: 'kind'},
					'kind ', showText(k, false), ' paused', op ?
						h('button', {type: 'button',
							'data-action': 'resume-kind',
							'data-key': 'resume-' + q.queue + '/' + k,
							onclick: () => act('/api/queues/resume', {
								queue: q.queue, kind: k}, () => 'Kind ' +
								k + ' resumed in queue ' + q.queue + '.')},
						'Resume') : null)))].concat(op ? [h('div', {
			class: 'cellacts'}, h('button', {type: 'button',
			'data-action': q.paused ? 'resume' : 'pause',
			'data-queue': q.queue, 'data-key': 'pause-' + q.queue,
			onclick: () => act('/api/queues/' + (q.paused ? 'resume' :
				'pause'), {queue: q.queue}, () => 'Queue ' + q.queue +
				(q.paused ? ' resumed.' : ' paused.'))},
			q.paused ? 'Resume' : 'Pause'),
		h('button', {type: 'button', 'data-action': 'limits',
			'data-key': 'limits-' + q.queue,
			onclick: () => limitsForm(editor, q)}, 'Limits\u2026'))] : [])),
		'num queues');
	}

	/* The limits form: outside the refreshed table, so a refresh leaves
	 * it as the user left it. */
	function limitsForm(editor, q) {
		const l = q.limits || {};
		const now = {
			global_concurrency: l.global_concurrency,
			per_key_concurrency: l.per_key_concurrency,
			rate: rateText(l.rate, l.rate_period_ms),
			burst: l.burst,
			rate_per_key: rateText(l.rate_per_key, l.rate_per_key_period_ms),
			burst_per_key: l.burst_per_key,
		};
		const inputs = LIMITS.map(([k, label, kind]) => h('div', {
			class: 'field'}, h('label', {for: 'l-' + k}, label),
		h('input', {id: 'l-' + k, name: k, type: kind === 'n' ? 'number' :
			'text', min: kind === 'n' ? '1' : null, step: kind === 'n' ?
			'1' : null, value: now[k] === null || now[k] === undefined ?
			'' : String(now[k])})));
		const fair = h('input', {id: 'l-fair', name: 'fair',
			type: 'checkbox', checked: !!l.fair});
		const reset = h('input', {id: 'l-reset', name: 'reset',
			type: 'checkbox'});
		const form = h('form', {class: 'panel', id: 'limits-form'},
			h('h2', null, 'Limits of queue ', showText(q.queue, false)),
			h('p', {class: 'muted'}, 'An empty field removes that limit.'),
			h('div', {class: 'filters'}, inputs,
				h('div', {class: 'field check'}, fair,
					h('label', {for: 'l-fair'}, 'Fair between keys')),
				h('div', {class: 'field check'}, reset,
					h('label', {for: 'l-reset'},
						'Reset to the configuration'))),
			h('div', {class: 'actions'},
				h('button', {type: 'submit', class: 'primary',
					'data-action': 'save-limits'}, 'Save'),
				h('button', {type: 'button', onclick: () =>
					editor.replaceChildren()}, 'Close')));
		form.addEventListener('submit', (ev) => {
			ev.preventDefault();
			const set = {};
			for (const [k, , kind] of LIMITS) {
				const v = form.elements.namedItem(k).value.trim();
				set[k] = v === '' ? null : kind === 'n' ? Number(v) : v;
			}
			set.fair = fair.checked;
			/* A reset alone: the config's limits, nothing set over them. */
			act('/api/queues/limits', reset.checked ? {queue: q.queue,
				reset: true} : {queue: q.queue, set: set}, () =>
				'Limits of queue ' + q.queue + (reset.checked ?
					' reset to the configuration.' : ' saved.'));
			editor.replaceChildren();
		});
		editor.replaceChildren(form);
		form.elements.namedItem(LIMITS[0][0]).focus();
	}

	/* --- schedules, tasks ------------------------------------------- */

	routes.schedules = function (p) {
		const out = region('schedules');
		p.always = true; /* "in 21 s" moves on */
		main.append(h('h1', null, 'Schedules'), out);
		p.url = () => '/api/schedules';
		p.render = (d) => {
			const op = operator();
			out.replaceChildren(table(['name', 'cron', 'kind', 'queue',
				'time zone', 'enabled', 'last tick', 'next tick',
				'run requested'].concat(op ? ['actions'] : []),
			(d.schedules || []).map((s) => [short(s.name, 60),
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
			s.enabled ? 'Disable' : 'Enable'))] : []))));
		};
	};

	routes.tasks = function (p) {
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
	};

	/* --- workflows -------------------------------------------------- */

	routes.workflows = function (p) {
		p.before = '';
		p.cursors = [];
		const out = region('workflows');
		const pager = h('div', {class: 'pager'});
		main.append(h('h1', null, 'Workflows'), out, pager);
		p.url = () => '/api/workflows' + query({before: p.before});
		p.render = (d) => {
			out.replaceChildren(table(['id', 'name', 'created', 'steps',
				'ended', 'failed', 'finished'], (d.workflows || []).map(
				(w) => [h('a', {href: '#/workflow/' + Number(w.id)},
					String(w.id)), short(w.name, 80), time(w.created_at),
				num(w.steps), num(w.ended), Number(w.failed) ? h('span', {
					class: 'badge st-dead'}, num(w.failed)) : '0',
				time(w.finished_at)]), 'num'));
			drawPager(p, d, pager);
		};
	};

	routes.workflow = function (p) {
		const id = Number(p.r.arg);
		if (!Number.isSafeInteger(id) || id <= 0)
			return notFound(p);
		const out = region('workflow');
		main.append(h('h1', null, 'Workflow ' + id), out);
		p.url = () => '/api/workflow/' + id;
		p.render = (d) => {
			const w = d.workflow || {};
			out.replaceChildren(dl([
				['name', short(w.name, 200)],
				['created', time(w.created_at)],
				['finished', time(w.finished_at)],
				['steps', num(w.steps)],
				['jobs', h('a', {href: '#/jobs?workflow=' + id},
					'the steps in the jobs page')]]),
			section('Graph', dag(d.steps || [], d.edges || [])),
			section('Steps', table(['job', 'step', 'kind', 'queue',
				'state', 'attempts', 'last error'], (d.steps || []).map(
				(s) => [jobLink(s.id), short(s.step, 60),
					short(s.kind, 60), short(s.queue, 40), badge(s.state),
					String(s.attempts), short(s.last_error, 120)]))));
		};
	};

	/*
	 * The DAG, by layers: a step's layer is one more than its deepest
	 * parent's; layers are columns, left to right; each step a link to its
	 * job, coloured by its state.
	 */
	function dag(steps, edges) {
		if (!steps.length)
			return h('p', {class: 'muted'}, 'No steps.');
		if (steps.length > 400)
			return h('p', {class: 'muted'}, steps.length +
				' steps: too many to draw; the table lists them.');
		const byId = new Map(steps.map((s) => [s.id, s]));
		const parents = new Map(steps.map((s) => [s.id, []]));
		for (const e of edges)
			if (byId.has(e.parent) && parents.has(e.child))
				parents.get(e.child).push(e.parent);
		const layer = new Map();
		const depth = (id, seen) => {
			if (layer.has(id))
				return layer.get(id);
			if (seen.has(id))
				return 0; /* a cycle: cannot happen, draw anyway */
			seen.add(id);
			let d = 0;
			for (const q of parents.get(id))
				d = Math.max(d, depth(q, seen) + 1);
			layer.set(id, d);
			return d;
		};
		const cols = [];
		for (const s of [...steps].sort((a, b) => a.id - b.id)) {
			const d = depth(s.id, new Set());
			(cols[d] = cols[d] || []).push(s);
		}
		const BW = 168, BH = 46, GX = 56, GY = 14, PAD = 8;
		const pos = new Map();
		cols.forEach((c, i) => c.forEach((s, j) => pos.set(s.id, {
			x: PAD + i * (BW + GX), y: PAD + j * (BH + GY)})));
		const W = PAD * 2 + cols.length * (BW + GX) - GX;
		const H = PAD * 2 + Math.max(...cols.map((c) => c.length)) *
			(BH + GY) - GY;
		const g = svg('svg', {class: 'dag', viewBox: '0 0 ' + W + ' ' + H,
			width: W, height: H, role: 'group',
			'aria-label': 'the workflow\'s steps by layer'});
		for (const e of edges) {
			const a = pos.get(e.parent), b = pos.get(e.child);
			if (!a || !b)
				continue;
			const x1 = a.x + BW, y1 = a.y + BH / 2, x2 = b.x,
				y2 = b.y + BH / 2, m = (x1 + x2) / 2;
			g.appendChild(svg('path', {class: 'edge', d: 'M' + x1 + ',' +
				y1 + ' C' + m + ',' + y1 + ' ' + m + ',' + y2 + ' ' + x2 +
				',' + y2}));
		}
		for (const s of steps) {
			const o = pos.get(s.id);
			const st = STATES.includes(s.state) ? s.state : 'other';
			const name = s.step || s.kind || String(s.id);
			g.appendChild(svg('a', {href: '#/job/' + Number(s.id),
				class: 'node st-' + st},
			svg('title', null, name + ': ' + s.state + ' (job ' + s.id +
				')'),
			svg('rect', {x: o.x, y: o.y, width: BW, height: BH, rx: 6}),
			svg('text', {x: o.x + 8, y: o.y + 19, class: 'name'},
				visible(name, 22)),
			svg('text', {x: o.x + 8, y: o.y + 37, class: 'sub'},
				s.state + ' \u00b7 job ' + s.id)));
		}
		return h('div', {class: 'scroll dagbox'}, g);
	}

	/* A string for an SVG text node: hidden characters as \uXXXX, cut. */
	function visible(s, n) {
		let out = '';
		for (const c of String(s))
			out += HIDDEN.test(c) ? '\\u' + c.codePointAt(0).toString(16)
				.padStart(4, '0') : c;
		return out.length > n ? out.slice(0, n - 1) + '\u2026' : out;
	}

	/* --- keyboard, visibility, start ------------------------------- */

	document.addEventListener('keydown', (ev) => {
		if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey)
			return;
		const t = ev.target;
		if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/
			.test(t.tagName)))
			return;
		ev.preventDefault();
		const box = document.getElementById('f-q');
		if (box)
			box.focus();
		else if (S.page)
			location.hash = '#/jobs?focus=1';
	});

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

	let timer = null;

	/* (Re)starts the live updates at S.period. */
	function tick() {
		if (timer)
			clearInterval(timer);
		timer = setInterval(() => {
			if (document.visibilityState === 'visible')
				refresh(false);
		}, S.period);
	}

	tick();

	start();
})();
