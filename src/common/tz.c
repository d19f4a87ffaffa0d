/*
 * tz: IANA time zones read from TZif files (RFC 8536), and the calendar.
 *
 * cron needs, for an instant, the UTC offset in effect and the span of time
 * that keeps it, so that it can tell the repeated hour of autumn and the
 * skipped hour of spring from ordinary ones.  This reader gives exactly
 * that, instead of setenv("TZ") + tzset() + localtime_r()/mktime(): changing
 * TZ in the running daemon would change the local time of everything else in
 * the process (log lines, libpq, a plugin's threads) and is not thread-safe,
 * and what mktime() makes of a local time that does not exist, or exists
 * twice, differs between C libraries.
 *
 * A file holds transitions (instants where the offset changes) and, from
 * version 2, a footer with a POSIX TZ rule for the times after the last one.
 * Debian ships "fat" files whose transitions go on to 2037; "slim" ones stop
 * where the rule starts to hold (2007 for New York): both work.  The 64-bit
 * data of version 2+ files is used, the 32-bit data of version 1 otherwise.
 */
#include "common/tz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define DAY	 86400
#define TZIF_MAX (1 << 20) /* real files are under 100 KB */

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ---- the calendar ---- */

int64_t
tz_floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b < 0);
}

int
tz_is_leap(int64_t y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

int
tz_days_in_month(int64_t y, int m)
{
	static const int days[] = {31, 28, 31, 30, 31, 30,
				   31, 31, 30, 31, 30, 31};

	return m == 2 && tz_is_leap(y) ? 29 : days[m - 1];
}

/* Days since 1970-01-01 (proleptic Gregorian; H. Hinnant's algorithm). */
int64_t
tz_days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy;

	y -= m <= 2;
	era = tz_floor_div(y, 400);
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

void
tz_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = tz_floor_div(z, 146097);
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

/* 0 = Sunday: 1970-01-01 was a Thursday. */
int
tz_weekday(int64_t days)
{
	return (int)(days + 4 - tz_floor_div(days + 4, 7) * 7);
}

/* ---- spans of one offset ---- */

/* When a POSIX TZ rule changes the clock: "M3.5.0/2", "J60", "59/-1". */
struct tzrule {
	char kind;	      /* 'J' (1-365, no Feb 29), 'D' (0-365), 'M' */
	int month, week, day; /* M: month.week.weekday; J, D: day */
	int32_t time;	      /* seconds after local midnight */
};

struct tz_zone {
	int64_t *at;   /* transition times, ascending */
	uint8_t *type; /* the type in effect from at[i] */
	size_t n;
	int32_t *off; /* each type's UTC offset, seconds east */
	size_t ntypes;
	bool footer; /* a POSIX TZ rule applies after at[n - 1] */
	bool dst;    /* and it has daylight saving time */
	int32_t std_off, dst_off;
	struct tzrule start, end;
};

/* The local time of rule r in year y, in seconds counted as if UTC. */
static int64_t
rule_local(const struct tzrule *r, int64_t y)
{
	int64_t day = tz_days_from_civil(y, 1, 1), first;

	if (r->kind == 'J') {
		day += r->day - 1 + (tz_is_leap(y) && r->day >= 60);
	} else if (r->kind == 'D') {
		day += r->day;
	} else {
		first = tz_days_from_civil(y, r->month, 1);
		day = first + (r->day - tz_weekday(first) + 7) % 7 +
		      (r->week - 1) * 7;
		while (day >= first + tz_days_in_month(y, r->month))
			day -= 7; /* week 5: the last one */
	}
	return day * DAY + r->time;
}

/*
 * The span that holds u under the footer's rule, u at or after base->start,
 * the last transition of the file (base: the span that it begins).
 */
static void
footer_span(const struct tz_zone *z, int64_t u, struct tz_span *s)
{
	struct {
		int64_t at;
		int32_t off;
	} e[7], tmp;
	int64_t y;
	size_t n = 1, i;
	int m, d;

	s->end = TZ_FOREVER;
	if (!z->dst) {
		s->off = z->std_off;
		return;
	}
	e[0].at = s->start;
	e[0].off = s->off;
	tz_civil_from_days(tz_floor_div(u, DAY), &y, &m, &d);
	for (int64_t yy = y - 1; yy <= y + 1; yy++) {
		e[n].at = rule_local(&z->start, yy) - z->std_off;
		e[n].off = z->dst_off;
		n += e[n].at > s->start;
		e[n].at = rule_local(&z->end, yy) - z->dst_off;
		e[n].off = z->std_off;
		n += e[n].at > s->start;
	}
	for (i = 1; i < n; i++) /* insertion sort; stable */
		for (size_t j = i; j > 0 && e[j - 1].at > e[j].at; j--) {
			tmp = e[j];
			e[j] = e[j - 1];
			e[j - 1] = tmp;
		}
	for (i = 0; i + 1 < n && e[i + 1].at <= u; i++)
		;
	if (i > 0) {
		s->prev_off = e[i - 1].off;
		s->start = e[i].at;
		s->off = e[i].off;
	}
	if (i + 1 < n)
		s->end = e[i + 1].at;
}

void
tz_span(const struct tz_zone *z, int64_t u, struct tz_span *s)
{
	int32_t first = z->ntypes ? z->off[0] : 0;
	size_t lo = 0, hi = z->n, mid;

	while (lo < hi) { /* lo: how many transitions are at or before u */
		mid = lo + (hi - lo) / 2;
		if (z->at[mid] <= u)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		*s = (struct tz_span){TZ_NEVER, z->n ? z->at[0] : TZ_FOREVER,
				      first, first};
	} else {
		s->start = z->at[lo - 1];
		s->end = lo < z->n ? z->at[lo] : TZ_FOREVER;
		s->off = z->off[z->type[lo - 1]];
		s->prev_off = lo > 1 ? z->off[z->type[lo - 2]] : first;
	}
	if (s->end == TZ_FOREVER && z->footer)
		footer_span(z, u, s);
}

/* ---- the POSIX TZ rule in a TZif footer ---- */

/* A decimal number in lo..hi at *s. */
static bool
posix_int(const char **s, int lo, int hi, int *out)
{
	int v = 0;

	if (!is_digit(**s))
		return false;
	while (is_digit(**s)) {
		v = v * 10 + (*(*s)++ - '0');
		if (v > hi)
			return false;
	}
	*out = v;
	return v >= lo;
}

/* [+-]hh[:mm[:ss]] in seconds, hours up to max_h; NULL if malformed. */
static const char *
posix_hms(const char *s, int max_h, int32_t *out)
{
	int sign = *s == '-' ? -1 : 1, h, m = 0, sec = 0;

	if (*s == '+' || *s == '-')
		s++;
	if (!posix_int(&s, 0, max_h, &h))
		return NULL;
	if (*s == ':' && (s++, !posix_int(&s, 0, 59, &m)))
		return NULL;
	if (*s == ':' && (s++, !posix_int(&s, 0, 59, &sec)))
		return NULL;
	*out = sign * (h * 3600 + m * 60 + sec);
	return s;
}

/* A zone abbreviation: three letters or more, or <+0330>. */
static const char *
posix_abbr(const char *s)
{
	const char *p = s;

	if (*s == '<') {
		p = strchr(s, '>');
		return p && p - s >= 4 ? p + 1 : NULL;
	}
	while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
		p++;
	return p - s >= 3 ? p : NULL;
}

/* A date and time of change: Jn, n or Mm.w.d, then /time or 02:00. */
static const char *
posix_rule(const char *s, struct tzrule *r)
{
	bool ok;

	r->time = 7200;
	r->kind = *s == 'J' || *s == 'M' ? *s++ : 'D';
	if (r->kind == 'M')
		ok = posix_int(&s, 1, 12, &r->month) && *s++ == '.' &&
		     posix_int(&s, 1, 5, &r->week) && *s++ == '.' &&
		     posix_int(&s, 0, 6, &r->day);
	else
		ok = posix_int(&s, r->kind == 'J', 365, &r->day);
	if (!ok)
		return NULL;
	return *s == '/' ? posix_hms(s + 1, 167, &r->time) : s;
}

/* "CET-1CEST,M3.5.0,M10.5.0/3" into z; POSIX offsets count west. */
static int
posix_parse(const char *s, struct tz_zone *z)
{
	int32_t off;

	if (!(s = posix_abbr(s)) || !(s = posix_hms(s, 24, &off)))
		return -1;
	z->footer = true;
	z->std_off = -off;
	if (!*s)
		return 0;
	if (!(s = posix_abbr(s)))
		return -1;
	z->dst_off = z->std_off + 3600;
	if (*s != ',' && *s && (s = posix_hms(s, 24, &off)))
		z->dst_off = -off;
	/* DST without rules would mean the C library's default ones. */
	if (!s || *s != ',' || !(s = posix_rule(s + 1, &z->start)) ||
	    *s != ',' || !(s = posix_rule(s + 1, &z->end)) || *s)
		return -1;
	z->dst = true;
	return 0;
}

/* ---- TZif files (RFC 8536) ---- */

struct reader {
	const unsigned char *p;
	size_t left;
};

/* The header's counts, in file order. */
struct tzhead {
	unsigned char version;
	uint32_t isut, isstd, leap, time, type, chars;
};

static const unsigned char *
take(struct reader *r, size_t n)
{
	const unsigned char *p = r->p;

	if (n > r->left)
		return NULL;
	r->p += n;
	r->left -= n;
	return p;
}

static uint32_t
be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int
read_header(struct reader *r, struct tzhead *h)
{
	const unsigned char *p = take(r, 44);

	if (!p || memcmp(p, "TZif", 4))
		return -1;
	h->version = p[4];
	h->isut = be32(p + 20);
	h->isstd = be32(p + 24);
	h->leap = be32(p + 28);
	h->time = be32(p + 32);
	h->type = be32(p + 36);
	h->chars = be32(p + 40);
	/* Bounds that keep the sizes below from overflowing. */
	return h->type >= 1 && h->type <= 256 && h->time <= TZIF_MAX &&
			       h->chars <= TZIF_MAX && h->leap <= TZIF_MAX &&
			       h->isut <= 256 && h->isstd <= 256
		       ? 0
		       : -1;
}

/* The size of the data after the header, with tsize-byte times. */
static size_t
data_size(const struct tzhead *h, size_t tsize)
{
	return h->time * (tsize + 1) + h->type * 6 + h->chars +
	       h->leap * (tsize + 4) + h->isstd + h->isut;
}

/* Transitions and types; zones that count leap seconds are refused. */
static int
read_data(struct reader *r, const struct tzhead *h, size_t tsize,
	  struct tz_zone *z)
{
	const unsigned char *p = take(r, data_size(h, tsize));
	uint64_t v;

	if (!p || h->leap)
		return -1;
	z->n = h->time;
	z->at = xcalloc(z->n + 1, sizeof(*z->at));
	z->type = xcalloc(z->n + 1, sizeof(*z->type));
	z->ntypes = h->type;
	z->off = xcalloc(z->ntypes, sizeof(*z->off));
	for (size_t i = 0; i < z->n; i++, p += tsize) {
		v = tsize == 8 ? (uint64_t)be32(p) << 32 | be32(p + 4)
			       : (uint64_t)(int64_t)(int32_t)be32(p);
		z->at[i] = (int64_t)v;
		if (i > 0 && z->at[i] <= z->at[i - 1])
			return -1;
	}
	for (size_t i = 0; i < z->n; i++)
		if ((z->type[i] = *p++) >= z->ntypes)
			return -1;
	for (size_t i = 0; i < z->ntypes; i++, p += 6) {
		z->off[i] = (int32_t)be32(p);
		if (z->off[i] < -89999 || z->off[i] > 93599)
			return -1;
	}
	return 0;
}

/* A whole TZif file: header, data, and for version 2+ the footer. */
static int
zone_parse(const unsigned char *buf, size_t len, struct tz_zone *z)
{
	struct reader r = {buf, len};
	struct tzhead h;
	const unsigned char *nl;
	char *rule;
	int rc;

	if (read_header(&r, &h) < 0)
		return -1;
	if (h.version == 0)
		return read_data(&r, &h, 4, z);
	if (!take(&r, data_size(&h, 4)) || read_header(&r, &h) < 0 ||
	    read_data(&r, &h, 8, z) < 0)
		return -1;
	if (r.left < 2 || r.p[0] != '\n' ||
	    !(nl = memchr(r.p + 1, '\n', r.left - 1)))
		return -1;
	if (nl == r.p + 1)
		return 0; /* no rule: the last type lasts forever */
	rule = xstrndup((const char *)r.p + 1, (size_t)(nl - r.p - 1));
	rc = posix_parse(rule, z);
	free(rule);
	return rc;
}

/* A relative path of [A-Za-z0-9_+-.] whose components do not start with '.'. */
static bool
name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 || s[n - 1] == '/')
		return false;
	for (const char *p = s; *p; p++) {
		if ((p == s || p[-1] == '/') && (*p == '.' || *p == '/'))
			return false;
		if (!(is_digit(*p) || (*p >= 'a' && *p <= 'z') ||
		      (*p >= 'A' && *p <= 'Z') || strchr("/_+-.", *p)))
			return false;
	}
	return true;
}

/* The file at path, if it is a regular file of at most TZIF_MAX bytes. */
static int
read_file(const char *path, struct buf *b)
{
	char chunk[4096];
	struct stat st;
	ssize_t n = -1;
	int fd;

	/* O_NONBLOCK: a FIFO put there must not hang the scheduler. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size <= TZIF_MAX) {
		while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
			if (n < 0 && errno != EINTR)
				break;
			if (n > 0 && b->len > TZIF_MAX)
				break; /* it grew meanwhile */
			if (n > 0)
				buf_append(b, chunk, (size_t)n);
		}
	}
	close(fd);
	return n == 0 ? 0 : -1;
}

struct tz_zone *
tz_parse(const void *data, size_t len)
{
	struct tz_zone *z = xcalloc(1, sizeof(*z));

	if (zone_parse(data, len, z) == 0)
		return z;
	tz_free(z);
	return NULL;
}

struct tz_zone *
tz_load(const char *name)
{
	struct tz_zone *z = NULL;
	struct buf b = {0};
	char *path;

	if (!name || !strcmp(name, "UTC"))
		return xcalloc(1, sizeof(*z)); /* offset 0 forever */
	if (!name_ok(name))
		return NULL;
	path = xasprintf("%s/%s", TZ_ZONEINFO_DIR, name);
	if (read_file(path, &b) == 0)
		z = tz_parse(b.data, b.len);
	free(path);
	buf_free(&b);
	return z;
}

void
tz_free(struct tz_zone *z)
{
	if (!z)
		return;
	free(z->at);
	free(z->type);
	free(z->off);
	free(z);
}
