// refundd operator console. Plain JavaScript, no dependencies.
//
// Every value shown comes from the JSON API and reaches the page only as
// text: through h() below, which turns anything that is not a DOM node into
// a Text node. Nothing here parses HTML from strings; the
// Content-Security-Policy enforces that with Trusted Types.
'use strict';

(() => {
  const TOKEN_KEY = 'refundd.console.token';
  const MERCHANT_KEY = 'refundd.console.merchant';
  const KINDS = [
    { kind: 'stuck', title: 'Stuck', help: 'Unresolved past the stuck limit: reconcile to ask the provider now.' },
    { kind: 'UNKNOWN', title: 'Unknown outcome', help: 'The provider did not answer clearly: only a query (reconcile) settles it; resubmit sends the same bytes again.' },
    { kind: 'ABNORMAL', title: 'Abnormal', help: 'WeChat could not deliver the money: settle it with WeChat, then resolve.' },
    { kind: 'REJECTED', title: 'Rejected', help: 'Refused with a business code: fix the cause and resubmit, or abandon to release the amount (only once WeChat has no such refund and no earlier attempt can still land).' },
    { kind: 'conflict', title: 'Paid after failed', help: 'WeChat paid a refund refundd had closed as FAILED: it is counted as refunded; find out why it failed.' },
  ];
  const TERMINAL = new Set(['SUCCEEDED', 'FAILED']);
  // The API's reservation id pattern: only such a search is also tried as
  // a reservation's own id (GET /v1/reservations/{id}).
  const RESERVATION_ID = /^[0-9A-Za-z_-]{1,40}$/;
  // What GET /v1/search's "by" means, in words.
  const FOUND_BY = {
    reservation_id: 'reservation id', refund_no: 'refund number', out_trade_no: 'order (out_trade_no)',
    user_id: 'user id', transaction_id: 'transaction id', refund_id: 'WeChat refund id',
  };
  // who is the caller (GET /v1/whoami); null until known. Buttons are
  // offered only for permissions the token's role has; the API checks
  // every call regardless.
  let who = null;
  const may = (perm) => !!who && who.permissions.includes(perm);

  const $ = (id) => document.getElementById(id);
  const seg = encodeURIComponent;

  // h builds an element. props: class, text, on<event> handlers, anything
  // else as an attribute. Children that are not nodes become text.
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  // --- token -------------------------------------------------------------

  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';

  function setToken(t) {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
    showTokenState();
  }

  function showTokenState() {
    $('token-state').textContent = token() ? 'token set for this tab' : 'no token';
  }

  // --- merchant filter ---------------------------------------------------

  // The overview shows one merchant's refunds, or every merchant's the
  // token sees (''). Only names whoami lists in sees are offered or kept.
  const merchant = () => sessionStorage.getItem(MERCHANT_KEY) || '';

  function setMerchant(m) {
    if (m) sessionStorage.setItem(MERCHANT_KEY, m);
    else sessionStorage.removeItem(MERCHANT_KEY);
  }

  // merchantQuery is the query parameter of the filter: '' for all, else
  // 'merchant=NAME' preceded by sep.
  const merchantQuery = (sep) => (merchant() ? sep + 'merchant=' + seg(merchant()) : '');

  function showMerchantFilter() {
    const sees = who && Array.isArray(who.sees) ? who.sees : [];
    if (merchant() && !sees.includes(merchant())) setMerchant('');
    const select = $('merchant-filter');
    const options = [h('option', { value: '' }, 'All merchants')];
    for (const m of sees) options.push(h('option', { value: m }, m));
    select.replaceChildren(...options);
    select.value = merchant();
    // One merchant (or none known): nothing to choose.
    $('merchant-box').hidden = sees.length < 2;
  }

  // --- API ---------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, 'network', 'refundd did not answer (' + e.message + ')');
    }
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      // not JSON: the status says enough
    }
    if (!res.ok) {
      const err = data && data.error ? data.error : { code: String(res.status), message: res.statusText };
      throw new APIError(res.status, err.code, err.code + ': ' + err.message);
    }
    return data;
  }

  const refundPath = (r) => '/v1/reservations/' + seg(r.reservation_id) + '/refunds/' + seg(r.refund_no);

  // --- status line -------------------------------------------------------

  function say(text, tone) {
    const s = $('status');
    s.textContent = text;
    s.className = tone || '';
  }

  function explain(e, what) {
    if (e.status === 401) {
      say(what + ': the token is missing or was refused. Paste an operator token above.', 'error');
      $('token').focus();
    } else if (e.status === 403) {
      say(what + ': this token\u2019s role may not do that (' + e.message + ').', 'error');
    } else {
      say(what + ': ' + e.message, 'error');
    }
  }

  // --- formatting --------------------------------------------------------

  // money formats integer fen without floating point.
  function money(fen, currency) {
    if (!Number.isSafeInteger(fen)) return String(fen);
    const a = Math.abs(fen);
    const s = (fen < 0 ? '-' : '') + Math.floor(a / 100) + '.' + String(a % 100).padStart(2, '0');
    return currency ? s + ' ' + currency : s;
  }

  function when(t) {
    if (!t) return '';
    const d = new Date(t);
    return Number.isNaN(d.getTime()) ? String(t) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }

  function age(seconds) {
    if (!seconds) return '0s';
    if (seconds < 120) return Math.round(seconds) + 's';
    if (seconds < 7200) return Math.round(seconds / 60) + 'm';
    return Math.round(seconds / 3600) + 'h';
  }

  const stateBadge = (state) => h('span', { class: 'state', 'data-state': state }, state);

  // --- views -------------------------------------------------------------

  function show(id) {
    for (const s of ['overview', 'search', 'reservation']) $(s).hidden = s !== id;
  }

  // gen counts route() calls: an answer for an older one (a token
  // changed, a click elsewhere) is dropped, not drawn over a newer view.
  let gen = 0;
  const stale = (g) => g !== gen;

  async function route() {
    const g = ++gen;
    await loadWho(g);
    if (stale(g)) return;
    const q = /^#\/search\/(.+)$/.exec(location.hash);
    if (q) return showSearch(decode(q[1]), g);
    // #/reservation/ID, or #/reservation/ID/refund/NO to land on a refund.
    const m = /^#\/reservation\/([^/]+)(?:\/refund\/([^/]+))?$/.exec(location.hash);
    if (m) return showReservation(decode(m[1]), g, m[2] ? decode(m[2]) : '');
    return showOverview(g);
  }

  function decode(s) {
    try {
      return decodeURIComponent(s);
    } catch (_) {
      return s;
    }
  }

  const reservationHash = (id, refundNo) => '#/reservation/' + seg(id) + (refundNo ? '/refund/' + seg(refundNo) : '');

  async function loadWho(g) {
    let w = null;
    try {
      w = await api('GET', '/v1/whoami');
    } catch (_) {
      // no token or refused: no actions offered
    }
    if (stale(g)) return;
    who = w;
    showMerchantFilter();
    $('whoami').textContent = who
      ? 'signed in as ' + who.principal + (who.merchants.length ? ' (merchants ' + who.merchants.join(', ') + ')' : '')
      : '';
  }

  async function showOverview(g) {
    show('overview');
    document.title = 'refundd console';
    await Promise.all([loadSummary(g), loadAttention(g)]);
  }

  function card(title, value, detail, tone) {
    return h('div', { class: 'card' + (tone ? ' ' + tone : '') },
      h('div', { class: 'card-title' }, title),
      h('div', { class: 'card-value' }, value),
      detail ? h('div', { class: 'card-detail' }, detail) : null);
  }

  async function loadSummary(g) {
    const box = $('headline');
    let s;
    try {
      s = await api('GET', '/v1/summary' + merchantQuery('?'));
    } catch (e) {
      if (stale(g)) return;
      box.replaceChildren(h('p', { class: 'error' }, 'Summary unavailable: ' + e.message));
      explain(e, 'Summary');
      return;
    }
    const cards = [];
    if (s.attention) {
      for (const k of KINDS) {
        const c = s.attention[k.kind];
        if (!c) continue;
        cards.push(card(k.title, String(c.count) + (c.more ? '+' : ''), 'refunds', c.count > 0 ? 'warn' : 'ok'));
      }
    }
    if (typeof s.active_actors === 'number') cards.push(card('Active reservations', String(s.active_actors), 'actors in memory'));
    if (s.notifications) {
      const n = s.notifications;
      const detail = Object.keys(n).sort().filter((k) => n[k] > 0).map((k) => k + ' ' + n[k]).join(' \u00b7 ');
      const bad = (n.rejected || 0) + (n.unknown_refund || 0) + (n.mismatch || 0) + (n.error || 0);
      cards.push(card('Notifications', String(n.applied || 0) + ' applied', detail || 'none yet', bad > 0 ? 'warn' : 'ok'));
    }
    if (Array.isArray(s.webhooks)) {
      for (const w of s.webhooks) {
        cards.push(card('Webhook ' + w.name, String(w.events_behind) + ' behind',
          'parked ' + w.parked + ', oldest undelivered ' + age(w.oldest_undelivered_age_seconds),
          w.parked > 0 || w.events_behind > 100 ? 'warn' : 'ok'));
      }
    }
    if (!stale(g)) box.replaceChildren(...cards);
  }

  async function loadAttention(g) {
    const sections = await Promise.all(KINDS.map(async (k) => {
      const sec = h('section', { class: 'kind', id: 'kind-' + k.kind, 'data-kind': k.kind });
      let page;
      try {
        page = await api('GET', '/v1/refunds?state=' + seg(k.kind) + '&limit=100' + merchantQuery('&'));
      } catch (e) {
        sec.append(h('h2', null, k.title), h('p', { class: 'error' }, e.message));
        if (!stale(g)) explain(e, k.title);
        return sec;
      }
      // A refund flagged stuck is listed once, in the stuck table (with
      // its state badge); the tables of its state leave it out.
      const rows = (p) => p.refunds.filter((r) => k.kind === 'stuck' || k.kind === 'conflict' || !r.stuck);
      const count = h('span', { class: 'count' });
      sec.append(h('h2', null, k.title, ' ', count), h('p', { class: 'help' }, k.help));
      if (rows(page).length === 0 && !page.next) {
        count.textContent = '0';
        sec.append(h('p', { class: 'empty' }, 'None.'));
        return sec;
      }
      const body = h('tbody');
      const table = refundTable(body, true);
      sec.append(table);
      let shown = 0;
      const add = (p) => {
        const rs = rows(p);
        for (const r of rs) body.append(refundRow(r, true));
        shown += rs.length;
        count.textContent = String(shown) + (p.next ? '+' : '');
      };
      add(page);
      if (page.next) {
        let next = page.next;
        const more = h('button', {
          type: 'button',
          onclick: async () => {
            more.disabled = true;
            try {
              const p = await api('GET', '/v1/refunds?state=' + seg(k.kind) + '&limit=100&after=' + seg(next) + merchantQuery('&'));
              add(p);
              next = p.next;
              if (!next) more.remove();
            } catch (e) {
              explain(e, 'More');
            } finally {
              more.disabled = false;
            }
          },
        }, 'Show more');
        sec.append(more);
      }
      return sec;
    }));
    if (!stale(g)) $('attention').replaceChildren(...sections);
  }

  function refundTable(body, withReservation) {
    const cols = ['Refund', 'Amount', 'State', 'Provider code', 'Reason', 'Attempts', 'Updated', 'Actions'];
    if (withReservation) cols.unshift('Reservation');
    return h('div', { class: 'table-scroll' },
      h('table', null, h('thead', null, h('tr', null, cols.map((c) => h('th', null, c)))), body));
  }

  function refundRow(r, withReservation) {
    const tr = h('tr', { 'data-refund-no': r.refund_no, 'data-state': r.state });
    if (withReservation) {
      tr.append(h('td', { class: 'mono' }, h('a', { href: '#/reservation/' + seg(r.reservation_id) }, r.reservation_id)));
    }
    tr.append(
      h('td', { class: 'mono' }, r.refund_no),
      h('td', { class: 'num' }, money(r.amount)),
      h('td', { class: 'state-cell' }, stateBadge(r.state), r.stuck ? h('span', { class: 'tag' }, 'stuck') : null,
        r.conflicts ? h('span', { class: 'tag' }, 'conflicts ' + r.conflicts) : null),
      h('td', { class: 'message' }, r.code || '', r.message ? h('div', { class: 'muted' }, r.message) : null),
      h('td', { class: 'reason' }, r.reason || '', r.reason_code ? h('span', { class: 'tag' }, r.reason_code) : null,
        r.metadata ? h('div', { class: 'muted' }, Object.entries(r.metadata).map(([k, v]) => k + '=' + v).join(', ')) : null),
      h('td', { class: 'num' }, String(r.attempts)),
      h('td', { class: 'when' }, when(r.updated_at)),
      h('td', null, actions(r, tr)));
    return tr;
  }

  function actions(r, row) {
    const box = h('div', { class: 'actions' });
    if (TERMINAL.has(r.state) || !may('operate')) return box;
    box.append(h('button', {
      type: 'button', class: 'primary', 'data-action': 'reconcile',
      title: 'Ask the provider about this refund now',
      onclick: () => act(r, 'reconcile', undefined, row),
    }, 'Reconcile'));
    if (r.state === 'REJECTED' || r.state === 'UNKNOWN') {
      box.append(h('button', {
        type: 'button', 'data-action': 'resubmit',
        title: 'Send the same request again under the same refund number',
        onclick: () => act(r, 'resubmit', undefined, row),
      }, 'Resubmit'));
    }
    if (r.state === 'REJECTED') box.append(withReason(r, row, 'abandon', 'Abandon', false));
    if (r.state === 'ABNORMAL') box.append(withReason(r, row, 'resolve', 'Resolve', true));
    return box;
  }

  // withReason is a button that opens a small form asking for a reason.
  function withReason(r, row, action, label, required) {
    const wrap = h('span');
    const open = h('button', { type: 'button', class: 'danger', 'data-action': action }, label + '\u2026');
    open.addEventListener('click', () => {
      const input = h('input', { maxlength: '80', placeholder: required ? 'reason (required)' : 'reason', 'aria-label': label + ' reason' });
      const form = h('form', null, input,
        h('button', { type: 'submit', class: 'danger', 'data-action': action + '-confirm' }, label),
        h('button', { type: 'button', onclick: () => wrap.replaceChildren(open) }, 'Cancel'));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const reason = input.value.trim();
        if (required && !reason) {
          say(label + ' needs a reason.', 'error');
          input.focus();
          return;
        }
        act(r, action, reason ? { reason } : undefined, row);
      });
      wrap.replaceChildren(form);
      input.focus();
    });
    wrap.append(open);
    return wrap;
  }

  async function act(r, action, body, row) {
    const buttons = row ? row.querySelectorAll('button') : [];
    for (const b of buttons) b.disabled = true;
    say(action + ' ' + r.refund_no + '\u2026', 'info');
    try {
      let now = await api('POST', refundPath(r) + '/' + action, body);
      if (!TERMINAL.has(now.state) && action !== 'resolve' && action !== 'abandon') {
        say(action + ' ' + r.refund_no + ': journaled; waiting for the provider\u2026', 'info');
        now = await api('GET', refundPath(r) + '?wait=10s');
      }
      say(r.refund_no + ' is now ' + now.state + (now.code ? ' (' + now.code + ')' : ''), TERMINAL.has(now.state) ? 'ok' : 'info');
      if (row) {
        row.setAttribute('data-state', now.state);
        const cell = row.querySelector('.state-cell');
        if (cell) cell.replaceChildren(stateBadge(now.state));
      }
    } catch (e) {
      explain(e, action + ' ' + r.refund_no);
    } finally {
      for (const b of buttons) b.disabled = false;
    }
    await refreshView();
  }

  async function refreshView() {
    const status = $('status');
    const text = status.textContent;
    const tone = status.className;
    await route();
    // Keep the outcome of the last action in view after reloading lists.
    if (status.className !== 'error') say(text, tone);
  }

  // --- search ------------------------------------------------------------

  // showSearch looks q up as every kind of id (GET /v1/search, and the
  // reservation's own id): one match lands on its reservation, with the
  // refund it names marked; several are listed; none says so.
  async function showSearch(q, g) {
    show('search');
    document.title = 'Find ' + q + ' \u2013 refundd console';
    const box = $('search');
    const back = () => h('p', null, h('a', { href: '#/' }, '\u2190 Needs attention'));
    box.replaceChildren(h('p', { class: 'muted' }, 'Looking for ', h('span', { class: 'mono' }, q), '\u2026'));
    let found;
    let own = null;
    try {
      [found, own] = await Promise.all([
        api('GET', '/v1/search?q=' + seg(q) + '&limit=100'),
        RESERVATION_ID.test(q)
          ? api('GET', '/v1/reservations/' + seg(q)).catch((e) => {
            if (e.status === 404) return null;
            throw e;
          })
          : null,
      ]);
    } catch (e) {
      if (stale(g)) return;
      box.replaceChildren(back(), h('p', { class: 'error' }, 'Find ', h('span', { class: 'mono' }, q), ': ' + e.message));
      explain(e, 'Find');
      return;
    }
    if (stale(g)) return;
    const matches = own ? [{ by: 'reservation_id', reservation: own }] : [];
    matches.push(...found.matches);
    if (matches.length === 1) {
      // Replace the search in the history: Back returns to where it began.
      location.replace(reservationHash(matches[0].reservation.id, matches[0].refund_no));
      return;
    }
    const title = h('div', { class: 'title-row' }, h('h1', null, 'Find ', h('span', { class: 'mono' }, q)));
    if (matches.length === 0) {
      box.replaceChildren(back(), title, h('p', { class: 'empty', id: 'search-none' },
        'No reservation or refund this token sees has this id. Ids are matched whole: a reservation id, refund number, ' +
        'out_trade_no, user id, transaction_id or WeChat refund_id.'));
      return;
    }
    const cols = ['Found by', 'Reservation', 'Refund', 'State', 'Reason', 'Merchant', 'User', 'Order (out_trade_no)', 'Paid', 'Refunded'];
    const body = h('tbody');
    for (const m of matches) {
      const res = m.reservation;
      const r = m.refund_no ? res.refunds.find((x) => x.refund_no === m.refund_no) : null;
      body.append(h('tr', { 'data-reservation': res.id, 'data-refund-no': m.refund_no || undefined },
        h('td', null, FOUND_BY[m.by] || m.by),
        h('td', { class: 'mono' }, h('a', { href: reservationHash(res.id) }, res.id)),
        h('td', { class: 'mono' }, m.refund_no ? h('a', { href: reservationHash(res.id, m.refund_no) }, m.refund_no) : ''),
        h('td', { class: 'state-cell' }, stateBadge(r ? r.state : res.status)),
        h('td', { class: 'reason' }, r ? r.reason || '' : ''),
        h('td', null, res.merchant),
        h('td', { class: 'mono' }, res.user_id),
        h('td', { class: 'mono' }, res.out_trade_no),
        h('td', { class: 'num' }, money(res.amount, res.currency)),
        h('td', { class: 'num' }, money(res.refunded, res.currency))));
    }
    box.replaceChildren(back(), title,
      h('div', { class: 'panel' },
        h('p', { class: 'help' }, String(matches.length) + ' matches' + (found.truncated ? ' (more exist: only the first 100 are shown)' : '') + '.'),
        h('div', { class: 'table-scroll' },
          h('table', { id: 'search-results' }, h('thead', null, h('tr', null, cols.map((c) => h('th', null, c)))), body))));
  }

  async function showReservation(id, g, focusNo) {
    show('reservation');
    document.title = 'Reservation ' + id + ' \u2013 refundd console';
    const box = $('reservation');
    box.replaceChildren(h('p', { class: 'muted' }, 'Loading reservation ', h('span', { class: 'mono' }, id), '\u2026'));
    let res;
    let events = null;
    let timelineError = null;
    try {
      res = await api('GET', '/v1/reservations/' + seg(id));
    } catch (e) {
      if (stale(g)) return;
      box.replaceChildren(h('p', null, h('a', { href: '#/' }, '\u2190 Needs attention')),
        h('p', { class: 'error' }, 'Reservation ', h('span', { class: 'mono' }, id), ': ' + e.message));
      explain(e, 'Reservation');
      return;
    }
    try {
      events = (await api('GET', '/v1/reservations/' + seg(id) + '/events')).events;
    } catch (e) {
      timelineError = e;
    }
    if (stale(g)) return;
    const facts = h('dl', { class: 'facts' });
    const fact = (k, v) => facts.append(h('dt', null, k), h('dd', null, v));
    fact('Status', stateBadge(res.status));
    if (res.merchant) fact('Merchant', res.merchant);
    fact('User', res.user_id);
    fact('Order (out_trade_no)', h('span', { class: 'mono' }, res.out_trade_no));
    if (res.transaction_id) fact('Transaction', h('span', { class: 'mono' }, res.transaction_id));
    fact('Paid', money(res.amount, res.currency));
    fact('Refunded', money(res.refunded, res.currency));
    fact('In flight', money(res.in_flight, res.currency));
    fact('Refundable', money(res.refundable, res.currency));
    if (res.paid_at) fact('Paid at', when(res.paid_at));
    fact('Registered', when(res.registered_at));

    const refunds = h('div', { class: 'panel' }, h('h2', null, 'Refunds'));
    if (res.refunds.length === 0) {
      refunds.append(h('p', { class: 'empty' }, 'No refunds.'));
    } else {
      const body = h('tbody');
      for (const r of res.refunds) {
        const row = refundRow(r, false);
        if (r.refund_no === focusNo) row.classList.add('focus');
        body.append(row);
      }
      refunds.append(refundTable(body, false));
    }

    const timeline = h('div', { class: 'panel', id: 'timeline' }, h('h2', null, 'Journal timeline'));
    if (timelineError) {
      timeline.append(h('p', { class: 'error' }, 'Timeline unavailable: ' + timelineError.message));
    } else {
      const list = h('ol', { class: 'timeline' });
      for (const ev of events) {
        list.append(h('li', { 'data-type': ev.type },
          h('div', { class: 'ev-head' },
            h('span', { class: 'mono muted' }, '#' + ev.seq),
            h('span', { class: 'ev-type' }, ev.type),
            ev.refund_no ? h('span', { class: 'mono' }, ev.refund_no) : null,
            h('span', { class: 'muted' }, when(ev.at)),
            h('span', { class: 'muted' }, 'by ' + ev.by)),
          h('pre', { class: 'ev-data' }, JSON.stringify(ev.data, null, 1))));
      }
      timeline.append(list);
    }

    box.replaceChildren(
      h('p', null, h('a', { href: '#/' }, '\u2190 Needs attention')),
      h('div', { class: 'title-row' }, h('h1', null, 'Reservation ', h('span', { class: 'mono' }, res.id)),
        h('button', { type: 'button', onclick: () => refreshView() }, 'Refresh')),
      h('div', { class: 'panel' }, facts),
      refunds,
      timeline);
    const focused = box.querySelector('tr.focus');
    if (focused) focused.scrollIntoView({ block: 'center' });
  }

  // --- wiring ------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', () => {
    showTokenState();
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const input = $('token');
      setToken(input.value.trim());
      input.value = '';
      say(token() ? 'Token set for this tab.' : 'Token cleared.', 'ok');
      route();
    });
    $('token-forget').addEventListener('click', () => {
      setToken('');
      say('Token forgotten.', 'ok');
      route();
    });
    $('lookup').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const q = $('lookup-id').value.trim();
      if (!q) return;
      const hash = '#/search/' + seg(q);
      // The same search again (after the data changed) still runs.
      if (location.hash === hash) route();
      else location.hash = hash;
    });
    $('refresh').addEventListener('click', () => refreshView());
    $('merchant-filter').addEventListener('change', (ev) => {
      setMerchant(ev.target.value);
      route();
    });
    window.addEventListener('hashchange', () => route());
    route();
  });
})();
