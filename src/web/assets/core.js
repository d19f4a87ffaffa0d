/*
 * pgjob web: talking to the server, the banner, and the live updates.
 *
 * Every request carries the session's token (X-CSRF-Token), and every
 * POST Content-Type: application/json; the server checks both and the
 * role.  The token comes only in the answer that makes a session (a login,
 * GET /api/session?new=1), never to a request with only the cookie, which
 * a page of any other port of this host is sent too: the page keeps it in
 * localStorage, which is this origin's alone (its port included), so that
 * a reload and the console's other tabs have it (docs/security.md).
 *
 * Every 2 s (or 10, 30: the live bar, which also pauses) while the tab is
 * visible the current page's url is fetched again; when the answer
 * changed, only the data part is rebuilt, so an open form, the selection,
 * the scroll position and the focused control survive a refresh; while
 * the user selects text in the page or moves the pointer over its data,
 * the redraw waits (holding()).  The bar says when the data shown was
 * read, and marks it stale while the server fails.
 *
 * It imports only dom.js: what it needs of the entry (a new session, the
 * route) it calls through hooks, which app.js sets.
 */
import {fmtTime, h, showText} from '/dom.js';

/* What core.js calls of the modules that import it (app.js and keys.js
 * set them): start() makes a new session (and shows the login form, with
 * users); route() draws the page of the hash; rendered(p) after each
 * redraw (the keyboard's row mark). */
export const hooks = {start: () => {}, route: () => {}, rendered: () => {}};

/* The live updates' periods (the first by default), in ms. */
const PERIODS = [2000, 10000, 30000];

const TOKEN_KEY = 'pgjob_csrf';

export function token() {
	try {
		return localStorage.getItem(TOKEN_KEY) || '';
	} catch (e) {
		return '';
	}
}

export function keepToken(t) {
	try {
		if (t)
			localStorage.setItem(TOKEN_KEY, t);
		else
			localStorage.removeItem(TOKEN_KEY);
	} catch (e) {
		/* storage off: this page's life only (S.session.csrf) */
	}
}

export const S = {
	session: null, /* GET /api/session */
	page: null,    /* the current page: see route() */
	bannerKind: '',
	live: true,    /* live updates on (the Pause button) */
	period: PERIODS[0],
	trail: [],     /* the hashes the Older buttons left, for Newer */
};
export const main = document.getElementById('main');
const banner = document.getElementById('banner');

export function operator() {
	return S.session && S.session.role === 'operator';
}

/* --- talking to the server ------------------------------------- */

export class ApiError extends Error {
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
			setTimeout(hooks.start, 0);
		}
		throw new ApiError(r.status, msg,
			r.headers.get('Retry-After'), data);
	}
	if (data === null)
		throw new ApiError(r.status, 'the answer is not JSON');
	return {text: text, data: data};
}

export const get = (path) => call('GET', path);
export const post = (path, body) => call('POST', path, body);

export function query(obj) {
	const q = new URLSearchParams();
	for (const k in obj)
		if (obj[k] !== null && obj[k] !== undefined && obj[k] !== '')
			q.set(k, obj[k]);
	const s = q.toString();
	return s ? '?' + s : '';
}

/* --- the banner: errors (and what an action did) ---------------- */

export function say(kind, message, from) {
	banner.replaceChildren(h('span', {class: 'msg'},
		showText(message, false)), h('button', {type: 'button',
		class: 'close', 'aria-label': 'Dismiss',
		onclick: () => say('', '')}, '\u00d7'));
	banner.className = 'banner ' + kind;
	banner.hidden = !message;
	S.bannerKind = message ? from || kind : '';
}

export function sayError(e, from) {
	say('error', e && e.message ? e.message : String(e), from);
}

/* Runs an action; its answer (or error) in the banner, then the page
 * refreshes. */
export async function act(path, body, done) {
	try {
		const r = await post(path, body);
		say('info', done(r.data));
	} catch (e) {
		sayError(e, 'action');
	}
	refresh(true);
}

/* --- routing and the live refresh ------------------------------ */

export function parseHash() {
	return parseHashOf(location.hash);
}

export function parseHashOf(hash) {
	let s = hash.replace(/^#\/?/, '');
	const qi = s.indexOf('?');
	const q = new URLSearchParams(qi >= 0 ? s.slice(qi + 1) : '');
	if (qi >= 0)
		s = s.slice(0, qi);
	const parts = s.split('/');
	return {name: parts[0] || '', arg: parts[1] || '', q: q};
}

/* The tab's title: the page's, so that tabs and history tell apart. */
export function title(t) {
	document.title = (t ? t + ' \u00b7 ' : '') + 'pgjob console';
}

/*
 * The live updates' bar: when the page's data was read ("as of", and
 * marked stale while the server fails), why it is held (a selection,
 * the pointer on the data), Pause/Resume and the period.
 */
export function liveBar(p) {
	p.stamp = h('span', {id: 'as-of', class: 'muted'}, '');
	const pause = h('button', {type: 'button', id: 'live-toggle',
		class: 'link', onclick: toggleLive}, S.live ? 'Pause' : 'Resume');
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

/* Pause or resume the live updates (the bar's button, the p key). */
export function toggleLive() {
	S.live = !S.live;
	const pause = document.getElementById('live-toggle');
	if (pause)
		pause.textContent = S.live ? 'Pause' : 'Resume';
	if (S.live)
		refresh(false);
	if (S.page)
		drawStamp(S.page);
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
 * always).
 */
export async function refresh(force) {
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
		p.data = r.data;
		redraw(p);
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

/*
 * Draws the page's data as last read (a new answer, or a new sort order of
 * the same).  The focused control is found again after the redraw by its
 * data-key.
 */
export function redraw(p) {
	if (p.data === undefined)
		return;
	const focused = document.activeElement &&
		document.activeElement.getAttribute('data-key');
	p.render(p.data);
	if (focused) {
		const again = main.querySelector('[data-key="' +
			CSS.escape(focused) + '"]');
		if (again)
			again.focus({preventScroll: true});
	}
	hooks.rendered(p);
}

export function notFound(p) {
	main.append(h('h1', null, 'Not found'),
		h('p', null, h('a', {href: '#/'}, 'To the overview')));
}

let timer = null;

/* (Re)starts the live updates at S.period. */
export function tick() {
	if (timer)
		clearInterval(timer);
	timer = setInterval(() => {
		if (document.visibilityState === 'visible')
			refresh(false);
	}, S.period);
}
