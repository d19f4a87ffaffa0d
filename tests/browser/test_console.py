#!/usr/bin/python3
"""
The web console in a real browser: Debian's chromium, headless, driven by
selenium, against the real `pgjob web`, pgjobd and PostgreSQL that run.sh
started (see there).  Each step acts through the page as a person would and
checks the outcome in the database, not only on the page.

Steps: log in; filter to the failing kind; open a job and read its
attempt errors; create the marker, retry it and see it done; bulk-cancel a
filter's matches (the confirmation states the count, and asks again when
more match by the time the server acts); stop a running job from its page;
pause a queue and see
that no job of it starts, resume it and see the job run; hostile payloads,
kinds, queues and errors show as text and run nothing; the read-only user
sees no action and a forged POST from the page's own context gets 403 with
the database unchanged.  Along the way: a queue's limits and a schedule
changed through the page, a dead job retried from the dead-letter view,
the phone width and the dark theme.  A screenshot of every page goes to $PGJOB_SHOTS.

What operators miss elsewhere (docs/console.md): the jobs oldest first
(server side); the kind and queue fields' suggestions (any part of a
name, a hostile one as text); the keyboard (j/k, g + a page, ?, p, r, not
while typing); the queues', schedules' and tasks' tables sorted by a
header, in the address; the light/dark switch over the system's.

Issue 49's defects, each checked where the steps pass by: 150,000 done
jobs above the others, so that every filter finds its matches deep in the
table and says how many; "scheduled" as a filter, the overview's cards;
totals that are exact, estimates or bounds, never "0+"; a job that does
not exist; a bulk action's progress; a refresh that keeps a selection;
the page position in the address; a traceback's last line; stale data
flagged; actions by state, the tab's title, a bad time's message; the
failed and retried lines apart in the dark; the phone's queue cards.

Waits poll a condition (up to a generous bound, so a slow machine passes);
nothing asserts how long anything took.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import (NoAlertPresentException,
                                        StaleElementReferenceException,
                                        UnexpectedAlertPresentException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

URL = os.environ['PGJOB_WEB_URL']
DB = os.environ['PGJOB_DB']
MARKER = os.environ['PGJOB_MARKER']
SHOTS = os.environ['PGJOB_SHOTS']
OP = (os.environ['PGJOB_OP_USER'], os.environ['PGJOB_OP_PASS'])
RO = (os.environ['PGJOB_RO_USER'], os.environ['PGJOB_RO_PASS'])
# seconds: the bound of every wait, never a measured figure (shorter to
# see quickly where an old build fails)
WAIT = int(os.environ.get('PGJOB_BROWSER_WAIT', '90'))

HOSTILE_HTML = '<script>alert(1)</script>'
# The page's background, light and dark (app.css, --bg).
LIGHT_BG = 'rgb(247, 247, 245)'
DARK_BG = 'rgb(22, 24, 27)'
HOSTILE_IMG = '<img src=x onerror=alert(1)>'


T0 = time.monotonic()


def log(msg):
    # Seconds since the start: where the run's time goes, never asserted.
    print('browser: [%5.1f s] %s' % (time.monotonic() - T0, msg), flush=True)


def sql(query, *args):
    """Runs query on the test database; its rows as text lines.  args
    go in as psql variables (:'a1', :'a2', ...): never into the text."""
    cmd = ['psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
           '-d', DB]
    for i, a in enumerate(args, 1):
        cmd += ['-v', 'a%d=%s' % (i, a)]
    out = subprocess.run(cmd, input=query, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError('psql: %s\n%s' % (query, out.stderr))
    return out.stdout.strip()


def sql1(query, *args):
    return sql(query, *args).split('\n')[0]


def wait_for(what, fn):
    """Polls fn until it returns something true; fails after WAIT s."""
    end = time.monotonic() + WAIT
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
        # IndexError: a condition that reads a list twice while the page
        # rebuilds it (its rows gone between the reads) is read again.
        except (StaleElementReferenceException, AssertionError,
                IndexError) as e:
            last = e
        time.sleep(0.2)
    raise AssertionError('timed out waiting for %s (%s)' % (what, last))


def settled(fn):
    """Runs fn again while the page's own refresh (every 2 s) replaces an
    element fn reads between its find and its read (a stale element); at
    most WAIT s.  Its assertions fail at once: only staleness is retried."""
    end = time.monotonic() + WAIT
    while True:
        try:
            return fn()
        except StaleElementReferenceException:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


class Console:
    def __init__(self):
        o = webdriver.ChromeOptions()
        o.binary_location = '/usr/bin/chromium'
        # A throwaway profile (removed by quit()); --no-sandbox because
        # chromium's sandbox refuses root.
        self.profile = tempfile.mkdtemp(prefix='pgjob-browser-chromium.')
        for a in ['--headless=new', '--no-sandbox', '--disable-gpu',
                  '--disable-dev-shm-usage', '--window-size=1280,800',
                  '--disable-breakpad', '--disable-crash-reporter',
                  '--user-data-dir=' + self.profile]:
            o.add_argument(a)
        o.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        # A confirm() that opens while the test reads the page (a bulk
        # action's second question) stays open for the test to answer:
        # the driver's default dismisses it at the next read.
        o.set_capability('unhandledPromptBehavior', 'ignore')
        self.d = webdriver.Chrome(service=Service('/usr/bin/chromedriver'),
                                  options=o)
        self.viewport(1280, 800)

    def quit(self):
        self.d.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def viewport(self, w, hgt):
        # The page's own area, whatever the headless window adds around it.
        self.d.execute_cdp_cmd('Emulation.setDeviceMetricsOverride', {
            'width': w, 'height': hgt, 'deviceScaleFactor': 1,
            'mobile': w < 600})

    def go(self, route):
        self.d.get(URL + '#/' + route)
        self.no_alert()

    def css(self, sel):
        return self.d.find_elements(By.CSS_SELECTOR, sel)

    def one(self, sel):
        return wait_for(sel, lambda: (self.css(sel) or [None])[0])

    def click(self, sel):
        """Clicks the first element sel finds.  A page that refreshes
        itself (every 2 s) can replace the element between the find and
        the click: the click is then tried again on the new one (a stale
        element takes no click)."""
        def once():
            e = self.css(sel)
            if not e:
                return False
            e[0].click()
            return True
        wait_for('a click on ' + sel, once)

    def text(self, sel='main'):
        return settled(lambda: self.one(sel).text)

    def attr(self, sel, name):
        return settled(lambda: self.one(sel).get_attribute(name))

    def keys(self, *keys):
        """Keys pressed with the focus where it is (the page's body
        after a click outside a field)."""
        ActionChains(self.d).send_keys(*keys).perform()

    def ids(self, sel='#jobs tbody tr[data-id]'):
        return settled(lambda: [int(r.get_attribute('data-id'))
                                for r in self.css(sel)])

    def bg(self):
        return self.d.execute_script(
            'return getComputedStyle(document.documentElement)'
            '.backgroundColor')

    def shot(self, name):
        self.no_alert()
        path = os.path.join(SHOTS, name + '.png')
        self.d.save_screenshot(path)
        log('screenshot ' + path)

    def no_alert(self):
        try:
            a = self.d.switch_to.alert
            raise AssertionError('an alert fired: %r' % a.text)
        except NoAlertPresentException:
            pass

    def login(self, user, password):
        self.go('')
        for sel, value in (('#login-user', user),
                           ('#login-password', password)):
            self.one(sel).clear()
            self.one(sel).send_keys(value)
        self.click('#login button[type=submit]')
        wait_for('logged in as ' + user,
                 lambda: self.css('#user') and
                 self.css('#user')[0].text == user)

    def logout(self):
        self.click('#logout')
        self.one('#login-user')

    def session(self):
        return self.d.execute_async_script(
            'const done = arguments[0];'
            'fetch("/api/session").then(r => r.json()).then(done);')

    def forge(self, path, body):
        """A POST from the page's own context with the token the page kept
        (GET /api/session no longer hands it out): what a crafted request
        of a logged-in user can do."""
        return self.d.execute_async_script(
            'const [path, body, done] = arguments;'
            'fetch(path, {method: "POST", headers: {'
            '  "Content-Type": "application/json",'
            '  "X-CSRF-Token": localStorage.getItem("pgjob_csrf")},'
            '  body: JSON.stringify(body)})'
            '.then(r => done(r.status), e => done(String(e)));',
            path, body)

    def confirm(self, expect_in):
        a = wait_for('a confirmation', self.alert)
        msg = a.text
        assert expect_in in msg, 'confirmation %r lacks %r' % (msg, expect_in)
        a.accept()
        return msg

    def alert(self):
        try:
            return self.d.switch_to.alert
        except NoAlertPresentException:
            return None

    def errors(self):
        """The page's own JavaScript errors (not failed requests: a 403
        the test provokes is one)."""
        return [e for e in self.d.get_log('browser')
                if e['level'] == 'SEVERE' and 'Failed to load resource'
                not in e['message']]


def line_colours(c):
    """The overview chart's failed and retried lines' colours."""
    return c.d.execute_script(
        'return ["failed", "retried"].map((k) => getComputedStyle('
        '  document.querySelector("svg .line." + k)).stroke'
        '  .match(/\\d+/g).map(Number));')


def setup_jobs():
    """The jobs the steps act on, in exact states where they can be."""
    ids = {}
    ids['flaky'] = sql(
        "select pgjob.enqueue('flaky', jsonb_build_object('n', n))"
        " from generate_series(1, 3) n").split('\n')
    # Enough done to draw a line in the overview's chart.
    sql("select pgjob.enqueue('hello', jsonb_build_object('n', n))"
        " from generate_series(1, 500) n")
    # Far in the future: the bulk cancel's matches.
    sql("select pgjob.enqueue('later', '{}', run_at => now() + interval"
        " '30 days') from generate_series(1, 7)")
    ids['hostile'] = sql1(
        "select pgjob.enqueue(:'a1', jsonb_build_object('html', :'a2',"
        " 'img', :'a3', 'ctl', e'\\u001b[31mred\\u0007 \\u202e evil',"
        " 'repaired', e'bytes that were not UTF-8: \\ufffd\\ufffd'),"
        " queue => :'a2', run_at => now() + interval '30 days')",
        HOSTILE_IMG, HOSTILE_HTML, HOSTILE_IMG)
    # 1 MB: just under the default max_payload_bytes.
    ids["big"] = sql1(
        "select pgjob.enqueue('later', jsonb_build_object('big',"
        " repeat('x', 1048500)), run_at => now() + interval '30 days')")
    ids['workflow'] = sql1(
        "select pgjob.enqueue_workflow('{\"name\": \"publish <b>7</b>\","
        " \"steps\": ["
        " {\"name\": \"fetch\", \"kind\": \"hello\"},"
        " {\"name\": \"resize\", \"kind\": \"hello\", \"after\": [\"fetch\"]},"
        " {\"name\": \"check\", \"kind\": \"flaky\", \"after\": [\"fetch\"]},"
        " {\"name\": \"publish\", \"kind\": \"hello\","
        "  \"after\": [\"resize\", \"check\"]}]}')")
    return ids


def setup_scale():
    """Issue 49's data: 150,000 done jobs above every job setup_jobs made
    (a filter's matches lie below them all), a traceback, a backlog of
    10,001 due jobs in a paused queue no worker serves, and 12,000 dead
    jobs to act on in bulk."""
    sql("insert into pgjob.jobs (kind, queue, state, finished_at)"
        " select 'filler', 'bulk', 'done', now()"
        " from generate_series(1, 150000)")
    sql("insert into pgjob.jobs (kind, queue)"
        " select 'backlogged', 'backlog' from generate_series(1, 10001)")
    sql("insert into pgjob.jobs (kind, queue, state, finished_at, attempts,"
        " last_error) select 'gone', 'deadbulk', 'dead', now(), 2, 'no'"
        " from generate_series(1, 12000)")
    tb = sql1("insert into pgjob.jobs (kind, queue, state, finished_at,"
              " attempts, max_attempts, last_error)"
              " values ('tb', 'tbq', 'dead', now(), 2, 5,"
              " e'Traceback (most recent call last):\n' ||"
              " repeat(e'  File \"app.py\", line 7, in handle\n', 12) ||"
              " 'ValueError: the line that matters') returning id")
    sql("analyze pgjob.jobs")
    return tb


def main():
    os.makedirs(SHOTS, exist_ok=True)
    ids = setup_jobs()
    ids['tb'] = setup_scale()
    flaky = ids['flaky']
    # Three of their own and the workflow's step "check".
    log('waiting for the flaky jobs to die (max_attempts 2)')
    wait_for('flaky jobs dead', lambda: sql1(
        "select count(*) from pgjob.all_jobs where kind = 'flaky'"
        " and state = 'dead'") == '4')
    wait_for('hello jobs done', lambda: sql1(
        "select count(*) from pgjob.all_jobs where kind = 'hello'"
        " and workflow_id is null and state <> 'done'") == '0')

    c = Console()
    try:
        steps(c, ids, flaky)
    except BaseException:
        try:
            c.shot('failure')
            log('page text at the failure:\n' + c.text('body'))
            log('browser log (last 10): %r' % c.d.get_log('browser')[-10:])
        except Exception as e:  # the report must not hide the failure
            log('(no failure screenshot: %s)' % e)
        raise
    finally:
        c.quit()
    log('ok')


def history_steps(c, job):
    """A job's timeline on its page; a queue's history from the queues
    page (docs/console.md): its charts, its kinds as the database has them, a
    range picked, a hostile queue's name as text."""
    wait_for('the timeline of job ' + job,
             lambda: len(c.css('#timeline li')) >= 5)
    events = settled(lambda: [li.text for li in c.css('#timeline li')])
    assert 'enqueued' in events[0] and 'started' in events[1] and \
        'ended' in events[2], events
    wait_for('the history written', lambda: sql1(
        "select count(*) from pgjob.history_summary(interval '1 hour')"
        " where queue = 'default' and kind in ('hello', 'flaky')") == '2')
    c.go('queues')
    c.click('#queues a[href^="#/history?queue=default&"]')
    wait_for('three charts and the kinds', lambda: len(c.css(
        '#history svg.chart')) == 3 and 'hello' in c.text(
        '#history table.history-kinds') and 'flaky' in c.text(
        '#history table.history-kinds'))
    c.shot('history')
    c.one('#h-range').send_keys('last 24h')
    wait_for('the 24 h range', lambda: 'range=24h' in c.d.current_url and
             c.css('#history svg.chart'))
    c.go('history?queue=' + urllib.parse.quote(HOSTILE_HTML) + '&range=7d')
    wait_for('the hostile queue\'s history', lambda: HOSTILE_HTML in
             c.text('main h1'))
    assert not c.css('main script, main img'), 'markup from a name'
    c.no_alert()
    log('job %s: its timeline; the history of queue default' % job)
    # Back to the job's page, where the steps after these begin.
    c.go('job/' + job)
    wait_for('the attempts of job ' + job,
             lambda: len(c.css('table.attempts tbody tr')) >= 2)


def steps(c, ids, flaky):
    # --- log in ---------------------------------------------------------
    c.go('')
    c.one('#login-user')
    s = c.session()
    assert s['login_required'] is True and s['user'] is None, s
    c.shot('login')
    c.one('#login-user').send_keys(OP[0])
    c.one('#login-password').send_keys('not the password')
    c.click('#login button[type=submit]')
    wait_for('the wrong password refused',
             lambda: 'Wrong user or password' in c.text('#banner'))
    # A flood of new sessions meanwhile (anyone may ask for them) does not
    # end the login this page has begun.
    for _ in range(1100):
        with urllib.request.urlopen(URL + 'api/session', timeout=60) as r:
            r.read()
    c.login(*OP)
    assert c.text('#role') == 'operator'
    log('logged in as the operator')

    # --- overview ---------------------------------------------------------
    c.go('')
    wait_for('the overview', lambda: c.css('#overview svg.chart'))
    wait_for('the instance in the overview',
             lambda: 'Instances and workers' in c.text() and
             'heartbeat' in c.text())
    assert HOSTILE_HTML in c.text(), 'the hostile queue name as text'
    # Jobs no live worker serves (kind "later", and the hostile job's kind
    # and queue): a warning, the names as text.
    wait_for('the warning of jobs no worker serves',
             lambda: c.css('#unserved'))
    assert 'later' in c.text('#unserved') and \
        HOSTILE_HTML in c.text('#unserved') and \
        HOSTILE_IMG in c.text('#unserved'), c.text('#unserved')
    assert not c.css('#unserved script, #unserved img'), 'markup from a name'
    # Totals past the queues' counting cap (10,001 due in "backlog"): an
    # estimate or a bound, said so; never "0+".
    wait_for('the capped totals', lambda: c.css('a[data-card=available]')
             and c.text('a[data-card=available] .n').startswith('\u2248'))
    for card in settled(lambda: [e.text for e in c.css('#overview a.card')]):
        assert not card.split('\n')[0].endswith('+'), card
    # "scheduled" is a filter, the card leads to it.
    assert c.attr('a[data-card=scheduled]', 'href').endswith(
        '#/jobs?state=scheduled')
    c.click('a[data-card=scheduled]')
    wait_for('the scheduled jobs', lambda: 'later' in c.text('#jobs'))
    assert c.attr('#f-state', 'value') == 'scheduled'
    assert c.attr('#banner', 'hidden'), c.text('#banner')
    assert all(t.count('available') for t in settled(lambda: [
        r.text for r in c.css('#jobs tbody tr[data-id]')])), \
        'a scheduled job not available'

    # --- jobs: filter to the failing kind --------------------------------
    c.go('jobs')
    # The kind field suggests the kinds that contain what is typed (not
    # only those that begin with it); a click picks one.
    kind = c.one('#f-kind')
    kind.send_keys('LAK')
    wait_for('the kinds suggested', lambda: 'flaky' in settled(
        lambda: [li.text for li in c.css('#f-kind-list li')]))
    c.shot('suggestions')
    settled(lambda: [li for li in c.css('#f-kind-list li')
                     if li.text == 'flaky'][0].click())
    assert c.attr('#f-kind', 'value') == 'flaky'
    assert not c.one('#f-kind-list').is_displayed()
    kind.send_keys(Keys.ENTER)
    wait_for('the filter in the address', lambda: 'kind=flaky' in
             c.d.current_url)
    rows = wait_for('four dead flaky jobs', lambda: [
        r.text for r in c.css('#jobs tbody tr[data-id]')
        if 'flaky' in r.text and 'dead' in r.text] if len(c.css(
            '#jobs tbody tr[data-id]')) == 4 else None)
    assert len(rows) == 4, rows
    # Found below 150,000 others, and counted.
    wait_for('the count', lambda: c.text('#match-count') == '4 jobs match')
    # Attempts of those allowed, never "2 / -".
    assert '\u2013' not in rows[0], rows[0]
    c.shot('jobs')
    # "/" focuses the text filter; a search in payloads and errors.
    c.click('main h1')
    c.d.switch_to.active_element.send_keys('/')
    assert c.d.switch_to.active_element.get_attribute('id') == 'f-q'
    c.d.switch_to.active_element.send_keys('failing on purpose', Keys.ENTER)
    wait_for('the text search', lambda: 'q=failing' in c.d.current_url and
             len(c.css('#jobs tbody tr[data-id]')) == 4)

    # Keyset paging: 50 a page, older and back.
    c.go('jobs')
    wait_for('a full page', lambda: len(c.css('#jobs tbody tr[data-id]'))
             == 50)
    first = settled(lambda: [int(r.get_attribute('data-id'))
                             for r in c.css('#jobs tbody tr[data-id]')])
    assert first == sorted(first, reverse=True), 'not newest first'
    c.click('#older')
    wait_for('the older page', lambda: c.css('#jobs tbody tr[data-id]') and
             int(c.css('#jobs tbody tr[data-id]')[0].get_attribute(
                 'data-id')) < min(first))
    # The position is in the address: a reload stays there.
    assert 'before=' in c.d.current_url, c.d.current_url
    c.d.refresh()
    wait_for('the older page after a reload', lambda: c.css(
        '#jobs tbody tr[data-id]') and int(c.css('#jobs tbody tr[data-id]')[
            0].get_attribute('data-id')) < min(first))
    c.click('button[data-key=newer]')
    # The newest page again: from first[0], or from a job a schedule's
    # tick enqueued since (every-minute in run.sh: under
    # the sanitizers the paging above can straddle a minute).
    wait_for('back to the newest', lambda: c.css(
        '#jobs tbody tr[data-id]') and int(c.css('#jobs tbody tr[data-id]')[
            0].get_attribute('data-id')) >= first[0])
    # Oldest first: the server's keyset the other way, from the oldest
    # job, a page up (Newer), the position in the address.
    c.go('jobs?order=asc')
    wait_for('the oldest first', lambda: len(c.ids()) == 50)
    asc = c.ids()
    assert asc == sorted(asc) and asc[0] == int(sql1(
        'select min(id) from pgjob.all_jobs')), asc[:5]
    assert c.attr('#f-order', 'value') == 'asc'
    c.click('#newer')
    wait_for('the next page up', lambda: c.ids() and
             min(c.ids()) > max(asc) and 'after=' in c.d.current_url)
    # Through the windows a filter reads (a kind, 150,000 jobs above):
    # the order picked in the form.
    c.go('jobs?kind=flaky')
    wait_for('the flaky jobs', lambda: len(c.ids()) == 4)
    Select(c.one('#f-order')).select_by_value('asc')
    wait_for('the flaky jobs oldest first', lambda: 'order=asc' in
             c.d.current_url and len(c.ids()) == 4 and
             c.ids() == sorted(c.ids()))
    assert c.d.execute_async_script(
        'const done = arguments[0];'
        'fetch("/api/jobs?order=sideways", {headers: {"X-CSRF-Token":'
        '  localStorage.getItem("pgjob_csrf")}}).then(r => done(r.status));'
        ) == 400, 'an order that is none'
    log('jobs oldest first, paged up; a filter oldest first')
    c.go('jobs?kind=flaky')
    wait_for('the flaky jobs', lambda: len(c.ids()) == 4)
    rows = c.ids()

    # --- the keyboard --------------------------------------------------------
    # j and k move through the rows, Enter opens one; g and a letter go to
    # a page; ? lists the keys, Escape closes the list; p pauses, and r
    # then refreshes; none fires while typing in a field.
    c.click('main h1')
    c.keys('j', 'j', 'k')
    wait_for('the first row marked', lambda: c.ids('#jobs tr.kbd') ==
             rows[:1])
    assert c.d.switch_to.active_element.get_attribute('href').endswith(
        '#/job/%d' % rows[0])
    c.keys(Keys.ENTER)
    wait_for('its page', lambda: c.d.current_url.endswith(
        '#/job/%d' % rows[0]))
    for k, route in (('q', '#/queues'), ('d', '#/dead'), ('o', '#/'),
                     ('j', '#/jobs')):
        c.keys('g', k)
        wait_for('g ' + k, lambda: c.d.current_url.endswith(route))
    c.keys('?')
    wait_for('the keys listed', lambda: c.attr('#keys-help', 'open'))
    assert 'pause / resume' in c.text('#keys-help')
    c.shot('keys')
    c.keys(Keys.ESCAPE)
    wait_for('the list closed', lambda: not c.attr('#keys-help', 'open'))
    c.go('jobs?kind=flaky')
    wait_for('the flaky jobs', lambda: len(c.ids()) == 4)
    c.click('main h1')
    c.keys('p')
    wait_for('paused', lambda: c.text('#as-of').startswith('Paused'))
    sql("update pgjob.jobs set last_error = last_error || ' (by r)'"
        " where id = :a1", rows[0])
    c.keys('r')
    wait_for('r redraws while paused', lambda: '(by r)' in c.text('#jobs'))
    assert c.text('#as-of').startswith('Paused')
    c.keys('p')
    wait_for('live again', lambda: c.text('#live-toggle') == 'Pause')
    c.one('#f-q').click()
    c.keys('gq')
    assert c.attr('#f-q', 'value') == 'gq' and '#/jobs' in c.d.current_url
    log('keyboard: rows, g + page, ? and Escape, p and r; not in a field')
    c.go('jobs?kind=flaky')

    # --- job: its attempt errors ------------------------------------------
    job = flaky[0]
    c.click('#jobs a[href="#/job/%s"]' % job)
    wait_for('the attempts of job ' + job,
             lambda: len(c.css('table.attempts tbody tr')) >= 2)
    attempts = c.css('table.attempts tbody tr')
    for a in attempts:
        assert 'marker %s is missing' % MARKER in a.text, a.text
        assert HOSTILE_HTML in a.text, 'the markup of the error as text'
        assert '\\u001b' in a.text, 'the escape shown, not sent'
    assert 'exit status 3' in c.text('#last-error')
    # A dead job can be retried, not cancelled; the tab says which job.
    c.one('#job-actions button[data-action=retry]')
    assert not c.css('#job-actions button[data-action=cancel]')
    assert c.d.title.startswith('Job %s (dead)' % job), c.d.title
    assert c.css('#enqueue-command') and 'pgjob enqueue' in \
        c.text('#enqueue-command')
    c.no_alert()
    c.shot('job')
    log('job %s: %d attempts, their errors as text' % (job, len(attempts)))
    history_steps(c, job)

    # --- retry it, see it done --------------------------------------------
    open(MARKER, 'w').close()
    c.click('#job-actions button[data-action=retry]')
    wait_for('job %s done in the database' % job, lambda: sql1(
        'select state from pgjob.all_jobs where id = :a1', job) == 'done')
    wait_for('job %s done on the page' % job,
             lambda: 'done' in c.text('main h1'))
    log('job %s retried and done' % job)

    # --- bulk cancel a filter's matches -----------------------------------
    c.go('jobs?kind=later&state=available')
    wait_for('the later jobs', lambda: len(c.css(
        '#jobs tbody tr[data-id]')) == 8)
    c.click('#bulk button[data-action=cancel-all]')
    a = wait_for('a confirmation', c.alert)
    assert 'all 8 jobs' in a.text, a.text
    # One more matches while the operator reads the question: never more
    # than the 8 confirmed are taken.  A count that one request made
    # (docs/console.md, "Bulk actions"): the server answers 409 with the
    # new count and the page asks again.  A count made in parts (the
    # windows of ids, when the first request's time ran out, as on a
    # loaded machine): the action starts where the count did, and the job
    # enqueued since is not among them.
    later = sql1("select pgjob.enqueue('later', '{}', run_at => now()"
                 " + interval '30 days')")
    a.accept()

    def outcome():
        try:
            al = c.alert()
            if al:
                return ('asked', al)
            t = c.text('#banner')
        except UnexpectedAlertPresentException:
            return None
        return ('acted', t) if 'jobs cancelled' in t else None
    how, v = wait_for('a new question or the answer', outcome)
    if how == 'asked':
        assert 'Now 9 jobs match, not 8. Cancel all 9 jobs' in v.text, v.text
        v.accept()
        wait_for('the answer in the banner',
                 lambda: '9 jobs cancelled' in c.text('#banner'))
        assert sql1("select count(*) from pgjob.all_jobs where kind ="
                    " 'later' and state = 'cancelled'") == '9'
        log('bulk cancel: 8 confirmed, 9 by then: asked again, 9 cancelled')
    else:
        assert '8 jobs cancelled' in v, v
        assert sql1("select count(*) from pgjob.all_jobs where kind ="
                    " 'later' and state = 'cancelled'") == '8'
        assert sql1("select state from pgjob.all_jobs where id = :'a1'",
                    later) == 'available'
        log('bulk cancel: 8 confirmed, counted in parts: 8 cancelled,'
            ' the one enqueued since left')

    # --- a bulk action on 12,000: progress, buttons held ---
    c.go('dead?queue=deadbulk')
    wait_for('the count', lambda: c.text('#match-count') ==
             '12,000 jobs match')
    # Retry all asks first too.
    c.click('#bulk button[data-action=retry-all]')
    a = wait_for('a confirmation', c.alert)
    assert 'Retry all 12,000 jobs' in a.text, a.text
    a.dismiss()
    c.d.execute_script(
        'window.seen = {texts: [], disabled: false};'
        'new MutationObserver(() => {'
        '  seen.texts.push(document.getElementById("banner").textContent);'
        '  if (document.querySelector("#bulk button:disabled"))'
        '    seen.disabled = true;'
        '}).observe(document.body, {subtree: true, childList: true,'
        '  attributes: true, characterData: true});')
    c.click('#bulk button[data-action=delete-all]')
    c.confirm('Delete all 12,000 jobs')
    wait_for('the deletion done', lambda: '12,000 jobs deleted' in
             c.text('#banner'))
    seen = c.d.execute_script('return window.seen')
    assert seen['disabled'], 'the buttons stayed enabled'
    assert any('5,000 of 12,000' in t for t in seen['texts']), seen['texts']
    assert not c.attr('#bulk button[data-action=delete-all]', 'disabled')
    assert sql1("select count(*) from pgjob.all_jobs"
                " where queue = 'deadbulk'") == '0'
    log('bulk delete of 12,000: confirmed, progress shown, buttons held')

    # --- stop a running job from its page, as pgjob cancel does ----------
    sleeper = sql1("select pgjob.enqueue('sleeper', '{}', queue => 'slow')")
    wait_for('the sleeper running', lambda: sql1(
        'select state from pgjob.all_jobs where id = :a1', sleeper) == 'running')
    c.go('job/' + sleeper)
    wait_for('its page says running', lambda: 'running' in c.text('main h1'))
    c.click('#job-actions button[data-action=cancel]')
    c.confirm('Job %s is running: stop it?' % sleeper)
    wait_for('the sleeper cancelled', lambda: sql1(
        'select state from pgjob.all_jobs where id = :a1', sleeper) ==
        'cancelled')
    wait_for('the answer in the banner',
             lambda: 'its worker stops it' in c.text('#banner'))
    log('running job %s cancelled from its page' % sleeper)

    # --- pause a queue: no job of it starts --------------------------------
    c.go('queues')
    c.one('button[data-action=pause][data-queue=mail]')
    c.shot('queues')
    # Sorted by a header: ascending, then descending, in the address (a
    # reload keeps it); the hostile queue's name sorts as text.
    names = lambda: settled(lambda: [e.text for e in c.css(
        '#queues tbody tr td:first-child a:first-child')])
    c.click('#queues th button[data-sort=available]')
    wait_for('ascending', lambda: 'sort=available' in c.d.current_url and
             c.attr('#queues th[aria-sort]', 'aria-sort') == 'ascending')
    assert names()[-1] == 'backlog', names()
    c.click('#queues th button[data-sort=available]')
    wait_for('descending', lambda: 'sort=-available' in c.d.current_url)
    c.d.refresh()
    wait_for('descending after a reload', lambda: c.attr(
        '#queues th[aria-sort]', 'aria-sort') == 'descending' and
        '\u25bc' in c.text('#queues th[aria-sort]'))
    assert names()[0] == 'backlog', names()
    c.click('#queues th button[data-sort=queue]')
    wait_for('by name', lambda: 'sort=queue' in c.d.current_url)
    assert names()[0] == HOSTILE_HTML, names()
    assert not c.css('#queues script, #queues img'), 'markup from a name'
    # The schedules and the tasks too.
    c.go('schedules?sort=-name')
    wait_for('the schedules by name, descending', lambda: [e.text for e in
             c.css('#schedules tbody td:first-child')][:2] ==
             ['nightly-report', 'every-minute'])
    c.go('tasks')
    wait_for('the task partitions', lambda: len(c.css('#tasks tbody tr'))
             >= 3)
    c.click('#tasks th button[data-sort=partition]')
    c.click('#tasks th button[data-sort=partition]')
    wait_for('by partition, descending', lambda: [e.text for e in c.css(
        '#tasks section:first-of-type tbody td:nth-child(2)')][:3] ==
        ['2', '1', '0'] and 'sort=-partition' in c.d.current_url)
    log('queues, schedules and tasks sorted by their headers')
    c.go('queues')
    c.click('button[data-action=pause][data-queue=mail]')
    c.one('button[data-action=resume][data-queue=mail]')
    held = sql1("select pgjob.enqueue('mailer', '{}', queue => 'mail')")
    # A job enqueued after it, in a queue that runs: once it is done the
    # workers have claimed since the held job was due.
    after = sql1("select pgjob.enqueue('hello', '{}')")
    wait_for('the job after it done', lambda: sql1(
        'select state from pgjob.all_jobs where id = :a1', after) == 'done')
    assert sql1('select state || attempts from pgjob.all_jobs where id = :a1',
                held) == 'available0', 'a job of a paused queue started'
    c.click('button[data-action=resume][data-queue=mail]')
    wait_for('the held job done after resume', lambda: sql1(
        'select state from pgjob.all_jobs where id = :a1', held) == 'done')
    log('pause held job %s while %s ran; resume ran it' % (held, after))

    # --- change a queue's limits, then reset them ---------------------------
    c.click('button[data-action=limits][data-key="limits-mail"]')
    for k, v in (('global_concurrency', '3'), ('rate', '10/s')):
        c.one('#l-' + k).clear()
        c.one('#l-' + k).send_keys(v)
    c.click('#limits-form button[data-action=save-limits]')
    wait_for('the limits in the database', lambda: sql1(
        "select global_concurrency || ' ' || rate || '/' || rate_period_ms"
        " || ' ' || source from pgjob.limits where queue = 'mail'")
        == '3 10/1000 sql')
    wait_for('the limits on the page', lambda: 'concurrency 3' in
             c.text('#queues'))
    c.click('button[data-action=limits][data-key="limits-mail"]')
    c.click('#l-reset')
    c.click('#limits-form button[data-action=save-limits]')
    wait_for('the limits reset', lambda: sql1(
        "select count(*) from pgjob.limits where queue = 'mail'") == '0')
    log('limits set through the page, then reset')

    # --- hostile data -----------------------------------------------------
    c.go('job/' + ids['hostile'])
    wait_for('the hostile job', lambda: HOSTILE_HTML in c.text())
    body = c.text()
    for s in (HOSTILE_HTML, HOSTILE_IMG, '\\u001b', '\\u0007', '\\u202e',
              '\ufffd\ufffd'):
        assert s in body, 'hostile text %r not shown' % s
    assert not c.css('main img'), 'markup from data became an element'
    assert len(c.css('script')) == 1, 'a script element from data'
    c.no_alert()
    c.go('job/' + ids['big'])
    wait_for('the 1 MB payload cut', lambda: c.css('#payload-download'))
    assert len(c.text('#payload')) < 200000
    c.no_alert()
    # A hostile queue's name suggested, as text; the arrows and Enter pick
    # it.
    c.go('jobs')
    c.one('#f-queue').send_keys('SCRIPT')
    wait_for('the hostile queue suggested', lambda: HOSTILE_HTML in
             c.text('#f-queue-list'))
    assert not c.css('#f-queue-list script, #f-queue-list img')
    c.one('#f-queue').send_keys(Keys.ARROW_DOWN, Keys.ENTER)
    assert c.attr('#f-queue', 'value') == HOSTILE_HTML
    c.no_alert()
    c.go('jobs?queue=' + HOSTILE_HTML)
    wait_for('the hostile kind in the list', lambda: HOSTILE_IMG in
             c.text('#jobs'))
    assert c.text('#match-count') == '1 job matches'
    c.no_alert()

    # --- a traceback's last line; a job that is not -----
    c.go('jobs?kind=tb')
    row = c.text('#jobs tr[data-id="%s"]' % ids['tb'])
    assert 'ValueError: the line that matters' in row, row
    assert '\\u000a' not in row and '2 / 5' in row, row
    c.go('job/99999999')
    wait_for('the page of no job', lambda: 'No job 99999999' in
             c.text('#not-found'))
    assert not c.css('#job-actions') and not c.css('[data-action]')
    assert 'not found' in c.d.title
    # No more asking: a refresh now (as when the tab shows again) sends
    # nothing (fetch is called synchronously by a refresh).
    calls = c.d.execute_script(
        'const calls = [], f = window.fetch;'
        'window.fetch = (u, o) => { calls.push(String(u)); return f(u, o); };'
        'document.dispatchEvent(new Event("visibilitychange"));'
        'window.fetch = f; return calls;')
    assert calls == [], calls
    # A time that is not one: the field named, no database text.
    c.go('jobs?from=garbage')
    wait_for('the bad time refused', lambda: 'from, to: a date and time'
             in c.text('#banner'))
    assert 'syntax' not in c.text('#banner')
    log('hostile payloads, kinds, queues and errors: text only')

    # --- the other pages ----------------------------------------------------
    c.go('schedules')
    wait_for('the schedules', lambda: 'nightly-report' in c.text())
    c.shot('schedules')
    c.click('button[data-action=disable][data-key="enable-nightly-report"]')
    wait_for('the schedule disabled', lambda: sql1(
        "select enabled from pgjob.schedules where name = 'nightly-report'")
        == 'f')
    c.click('button[data-action=enable][data-key="enable-nightly-report"]')
    wait_for('the schedule enabled', lambda: sql1(
        "select enabled from pgjob.schedules where name = 'nightly-report'")
        == 't')
    c.click('button[data-action=run][data-key="run-nightly-report"]')
    wait_for('a run of the schedule enqueued', lambda: sql1(
        "select count(*) from pgjob.all_jobs"
        " where unique_key like 'schedule:nightly-report:run:%'") == '1')
    log('schedule disabled, enabled and run through the page')
    c.go('tasks')
    wait_for('the task partitions', lambda: len([
        r for r in c.css('#tasks tbody tr') if 'feed-consumer' in r.text])
        == 3)
    wait_for('the duties', lambda: 'pgjob:scheduler' in c.text())
    c.shot('tasks')
    c.go('workflows')
    wait_for('the workflow', lambda: 'publish <b>7</b>' in c.text())
    c.shot('workflows')
    c.go('workflow/' + ids['workflow'])
    wait_for('the graph', lambda: len(c.css('svg.dag a.node')) == 4)
    c.shot('workflow')
    c.go('dead')
    wait_for('the dead jobs', lambda: 'flaky' in c.text('#jobs'))
    c.shot('dead')
    # The dead-letter view's retry, of one selected job.
    again = flaky[1]
    c.click('#jobs input.pick[data-key="pick-%s"]' % again)
    assert c.text('#selected') == '1 selected'
    # A live refresh that redraws the table keeps the selection and the
    # focus: change a row's text and wait for the page to show it.
    sql("update pgjob.jobs set last_error = last_error || ' (edited)'"
        " where id = :a1", flaky[2])
    wait_for('the refresh', lambda: '(edited)' in c.text('#jobs'))
    assert c.one('#jobs input.pick[data-key="pick-%s"]' % again
                 ).is_selected(), 'the selection lost by a refresh'
    assert c.d.switch_to.active_element.get_attribute('data-key') == \
        'pick-' + again, 'the focus lost by a refresh'
    assert c.text('#selected') == '1 selected'
    # A text selection holds the live updates, and survives them; let go,
    # the page shows what changed meanwhile.
    c.d.execute_script(
        'const r = document.createRange();'
        'r.selectNodeContents(document.querySelector('
        '  "#jobs tr[data-id=\'%s\'] td.err"));'
        'getSelection().removeAllRanges(); getSelection().addRange(r);'
        % flaky[2])
    sql("update pgjob.jobs set last_error = last_error || ' (again)'"
        " where id = :a1", flaky[2])
    wait_for('the updates held', lambda: 'held while you select' in
             c.text('#as-of'))
    assert '(edited)' in c.d.execute_script(
        'return getSelection().toString()'), 'the selection lost'
    assert '(again)' not in c.text('#jobs')
    c.d.execute_script('getSelection().removeAllRanges()')
    wait_for('the update after', lambda: '(again)' in c.text('#jobs'))
    c.click('#bulk button[data-action=retry-selected]')
    c.confirm('Retry 1 selected job?')
    wait_for('the retried dead job done', lambda: sql1(
        'select state from pgjob.all_jobs where id = :a1', again) == 'done')
    wait_for('it gone from the dead jobs', lambda: not c.css(
        '#jobs tr[data-id="%s"]' % again))
    log('dead job %s retried from the dead-letter view' % again)
    c.go('')
    wait_for('the overview', lambda: c.css('#overview svg.chart'))
    c.shot('overview')
    # The server gone: the data stays, marked stale with its time; back,
    # the mark goes.
    c.d.execute_cdp_cmd('Network.enable', {})
    c.d.execute_cdp_cmd('Network.setBlockedURLs', {'urls': ['*/api/*']})
    wait_for('the stale mark', lambda: c.text('#as-of').startswith(
        'Stale: as of') and c.css('main.is-stale #overview svg.chart'))
    c.d.execute_cdp_cmd('Network.setBlockedURLs', {'urls': []})
    wait_for('fresh again', lambda: c.text('#as-of').startswith('Updated')
             and not c.css('main.is-stale'))
    c.d.execute_cdp_cmd('Network.disable', {})
    c.viewport(390, 844)
    c.d.refresh()
    wait_for('the overview', lambda: c.css('#overview svg.chart'))
    c.shot('phone')
    # Nothing wider than the phone: wide tables scroll in their own box.
    for route, ready in (('', '#overview svg.chart'),
                         ('jobs', '#jobs tbody tr[data-id]'),
                         ('job/' + flaky[2], 'table.attempts'),
                         ('queues', '#queues tbody tr'),
                         ('workflow/' + ids['workflow'], 'svg.dag')):
        c.go(route)
        c.one(ready)
        width = c.d.execute_script(
            'return document.documentElement.scrollWidth')
        assert width <= 390, '#/%s is %d px wide at 390' % (route, width)
    # Within reach at 390 px: a queue's Pause; a row with an error stays
    # one line high; the attempts scroll in their box.
    c.go('queues')
    c.one('button[data-action=pause]')
    right = c.d.execute_script(
        'return document.querySelector("button[data-action=pause]")'
        '.getBoundingClientRect().right')
    assert right <= 390, 'Pause at %d px' % right
    c.go('jobs?kind=tb')
    height = settled(lambda: c.one('#jobs tr[data-id="%s"]' % ids['tb'])
                     .size['height'])
    assert height < 80, 'an error row %d px tall' % height
    c.go('job/' + ids['tb'])
    c.one('table.attempts')
    assert c.d.execute_script(
        'const b = document.querySelector("table.attempts").parentNode;'
        'return getComputedStyle(b).overflowX') == 'auto'
    c.viewport(1280, 800)
    # The dark theme, as a system set to dark gets it.
    c.d.execute_cdp_cmd('Emulation.setEmulatedMedia', {'features': [
        {'name': 'prefers-color-scheme', 'value': 'dark'}]})
    c.go('job/' + flaky[2])
    wait_for('the job in the dark', lambda: c.css('table.attempts'))
    assert c.bg() == DARK_BG, 'not the dark theme: ' + c.bg()
    # The header's switch over the system's setting: light, kept over a
    # reload; auto follows the system again.
    Select(c.one('#theme')).select_by_value('light')
    wait_for('the light theme', lambda: c.bg() == LIGHT_BG)
    c.d.refresh()
    wait_for('light after a reload', lambda: c.css('table.attempts') and
             c.attr('#theme', 'value') == 'light' and c.bg() == LIGHT_BG)
    Select(c.one('#theme')).select_by_value('auto')
    wait_for('the system\'s dark again', lambda: c.bg() == DARK_BG)
    # The failed and the retried lines apart.
    c.go('')
    c.one('#overview svg .line.retried')
    fr = line_colours(c)
    apart = sum(abs(a - b) for a, b in zip(fr[0], fr[1]))
    assert apart > 100, 'failed %r and retried %r too close' % tuple(fr)
    c.shot('dark')
    c.d.execute_cdp_cmd('Emulation.setEmulatedMedia', {'features': []})
    # A light system, the switch on dark: the page and the chart's lines
    # dark.
    light = line_colours(c)
    Select(c.one('#theme')).select_by_value('dark')
    wait_for('the dark theme by the switch', lambda: c.bg() == DARK_BG and
             line_colours(c) == fr)
    assert light != fr, light
    Select(c.one('#theme')).select_by_value('auto')
    wait_for('light again', lambda: c.bg() == LIGHT_BG)
    log('the theme: the system\'s, or the switch\'s, the chart\'s too')
    c.d.refresh()
    errs = c.errors()
    assert not errs, 'JavaScript errors: %r' % errs
    # After a reload the page still reads and acts: the token it kept
    # (GET /api/session, which the reload asks, no longer hands it out).
    s = c.session()
    assert s['user'] == OP[0] and 'csrf' not in s, s
    c.go('queues')
    c.one('#queues tbody tr')
    assert c.forge('/api/queues/pause', {'queue': 'default'}) == 200
    assert c.forge('/api/queues/resume', {'queue': 'default'}) == 200
    log('after a reload: reads, and acts with the token it kept')

    # --- the read-only user --------------------------------------------------
    c.logout()
    # A token kept that is not the session's (the server restarted, or
    # another tab logged in): the login makes a new session and goes
    # through.
    c.d.execute_script('localStorage.setItem("pgjob_csrf", "0".repeat(64))')
    c.d.refresh()
    c.login(*RO)
    assert c.text('#role') == 'read-only'
    dead = sql1("select id from pgjob.all_jobs where state = 'dead'"
                " order by id limit 1")
    for route, ready in (('jobs', '#jobs tbody tr[data-id]'),
                         ('job/' + dead, 'table.attempts'),
                         ('queues', '#queues tbody tr'),
                         ('schedules', '#schedules tbody tr'),
                         ('dead', '#jobs tbody tr[data-id]')):
        c.go(route)
        c.one(ready)
        acts = c.css('[data-action]')
        assert not acts, '%s: actions for a read-only user: %r' % (
            route, [a.text for a in acts])
    # What the forged requests would change: the dead job (retry), any
    # job's row (delete), the pause.  Not the other jobs' states: the
    # workers still run them (a job retried above may end meanwhile, as
    # one did in a loaded CI run).
    before = sql('select id from pgjob.all_jobs order by id').split()
    dead_before = sql('select state, attempts, run_at from pgjob.all_jobs'
                      ' where id = :a1', dead)
    paused = sql('select * from pgjob.queues order by 1')
    for path, body in (('/api/jobs/retry', {'ids': [int(dead)]}),
                       ('/api/jobs/delete', {'filter': {}}),
                       ('/api/queues/pause', {'queue': 'default'}),
                       ('/api/schedules/run', {'name': 'nightly-report'})):
        status = c.forge(path, body)
        assert status == 403, '%s as read-only: %r' % (path, status)
    after = sql('select id from pgjob.all_jobs order by id').split()
    assert set(before) <= set(after), 'jobs deleted: %r' % (
        sorted(set(before) - set(after)))
    assert sql('select state, attempts, run_at from pgjob.all_jobs'
               ' where id = :a1', dead) == dead_before, \
        'the dead job changed'
    assert sql('select * from pgjob.queues order by 1') == paused
    log('read-only: no actions drawn, forged POSTs 403, nothing changed')


if __name__ == '__main__':
    try:
        main()
    except AssertionError as e:
        log('FAIL: %s' % e)
        sys.exit(1)
