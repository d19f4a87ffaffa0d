/*
 * pgjob web: the light/dark switch.  "auto" follows the system
 * (prefers-color-scheme); "light" or "dark" sets data-theme on the root,
 * whose color-scheme picks every colour of app.css (light-dark() pairs,
 * the charts' lines among them).  Kept in localStorage, so that a reload
 * and the console's other tabs keep it.
 */
import {h} from '/dom.js';

const KEY = 'pgjob_theme';
const CHOICES = ['auto', 'light', 'dark'];

function kept() {
	try {
		const t = localStorage.getItem(KEY);
		return CHOICES.includes(t) ? t : 'auto';
	} catch (e) {
		return 'auto';
	}
}

function apply(t) {
	if (t === 'light' || t === 'dark')
		document.documentElement.setAttribute('data-theme', t);
	else
		document.documentElement.removeAttribute('data-theme');
}

function keep(t) {
	try {
		if (t === 'auto')
			localStorage.removeItem(KEY);
		else
			localStorage.setItem(KEY, t);
	} catch (e) {
		/* storage off: this page's life only */
	}
}

/* The switch, and the theme kept applied (another tab's choice too). */
export function themeSwitch() {
	const pick = h('select', {id: 'theme', 'aria-label': 'colour theme',
		title: 'colour theme'}, CHOICES.map((t) => h('option', {value: t,
		selected: t === kept()}, t === 'auto' ? 'theme: auto' : t)));
	pick.addEventListener('change', () => {
		keep(pick.value);
		apply(pick.value);
	});
	window.addEventListener('storage', (ev) => {
		if (ev.key === KEY || ev.key === null) {
			pick.value = kept();
			apply(pick.value);
		}
	});
	apply(kept());
	return pick;
}
