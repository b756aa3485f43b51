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
  const ZONE_KEY = 'refundd.console.zone';
  const AUTO_KEY = 'refundd.console.autorefresh';
  // The current view is drawn again this often while auto-refresh is on.
  const AUTO_EVERY_MS = 15000;
  const KINDS = [
    { kind: 'stuck', title: 'Stuck', help: 'Unresolved past the stuck limit: reconcile to ask the provider now.' },
    { kind: 'UNKNOWN', title: 'Unknown outcome', help: 'The provider did not answer clearly: only a query (reconcile) settles it; resubmit sends the same bytes again.' },
    { kind: 'ABNORMAL', title: 'Abnormal', help: 'WeChat could not deliver the money: settle it with WeChat, then resolve.' },
    { kind: 'REJECTED', title: 'Rejected', help: 'Refused with a business code: fix the cause and resubmit, or abandon to release the amount (only once WeChat has no such refund and no earlier attempt can still land).' },
    { kind: 'conflict', title: 'Paid after failed', help: 'WeChat paid a refund refundd had closed as FAILED: it is counted as refunded; find out why it failed.' },
    { kind: 'PENDING_APPROVAL', title: 'Awaiting approval', help: 'Held (counted in flight) and not sent to WeChat: an approver other than the requester approves it, which submits it, or rejects it, which releases the amount. Unapproved, it expires and is released.' },
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
    for (const c of children.flat(Infinity)) {
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
      // A refused field is named apart from its message ("bank_account"
      // + "must be the card number..."): the two read as one sentence.
      throw new APIError(res.status, err.code, err.code + ': ' + (err.field ? err.field + ' ' : '') + err.message);
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
    } else if (e.code === 'self_approval') {
      say(what + ': the principal who requested a refund cannot approve it; another approver must.', 'error');
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

  // yuan formats integer fen as the operator reads it: "¥123.45 CNY".
  // Refunds carry no currency of their own: a reservation's is CNY unless
  // it says otherwise.
  function yuan(fen, currency) {
    const c = currency || 'CNY';
    return (c === 'CNY' ? '\u00a5' : '') + money(fen, c);
  }

  // Times are shown in UTC or Beijing time (UTC+8 all year, no daylight
  // saving), as the operator chose for this tab; the browser's own zone is
  // never used.
  const beijing = () => sessionStorage.getItem(ZONE_KEY) === 'beijing';

  function setZone(z) {
    if (z === 'beijing') sessionStorage.setItem(ZONE_KEY, z);
    else sessionStorage.removeItem(ZONE_KEY);
  }

  function when(t) {
    if (!t) return '';
    const d = new Date(t);
    if (Number.isNaN(d.getTime())) return String(t);
    const bj = beijing();
    const shifted = new Date(d.getTime() + (bj ? 8 * 3600 * 1000 : 0));
    return shifted.toISOString().replace('T', ' ').replace(/\.\d+Z$/, '') + (bj ? ' UTC+8' : ' UTC');
  }

  // at is a time as an element: the text in the chosen zone, the instant
  // itself in datetime. On a narrow screen it may wrap between the date
  // and the time of day, never inside either.
  function at(t) {
    if (!t) return null;
    const d = new Date(t);
    const text = when(t);
    const i = text.indexOf(' ');
    return h('time', { datetime: Number.isNaN(d.getTime()) ? null : d.toISOString() },
      i < 0 ? text : [h('span', { class: 'nowrap' }, text.slice(0, i)), ' ', h('span', { class: 'nowrap' }, text.slice(i + 1))]);
  }

  // ago says how long ago t was, in words: "4 min ago".
  function ago(t) {
    const d = new Date(t);
    if (!t || Number.isNaN(d.getTime())) return '';
    const s = (Date.now() - d.getTime()) / 1000;
    if (s < 0) return 'in ' + span(-s);
    return span(s) + ' ago';
  }

  function span(s) {
    if (s < 60) return Math.floor(s) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min';
    if (s < 48 * 3600) return Math.floor(s / 3600) + ' h';
    return Math.floor(s / 86400) + ' days';
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
    for (const s of ['overview', 'search', 'reservation', 'refund', 'ops', 'list']) $(s).hidden = s !== id;
    for (const a of document.querySelectorAll('#views a')) a.classList.toggle('current', a.dataset.view === id);
  }

  // gen counts route() calls: an answer for an older one (a token
  // changed, a click elsewhere) is dropped, not drawn over a newer view.
  let gen = 0;
  const stale = (g) => g !== gen;

  async function route() {
    const g = ++gen;
    routing = true;
    // Assistive technology (and the browser tests) can tell a view being
    // drawn from a drawn one.
    document.body.setAttribute('aria-busy', 'true');
    try {
      await draw(g);
    } finally {
      if (!stale(g)) {
        routing = false;
        document.body.removeAttribute('aria-busy');
        drawnAt = Date.now();
        showUpdated();
      }
    }
  }

  async function draw(g) {
    await loadWho(g);
    if (stale(g)) return;
    if (location.hash === '#/ops') return showOps(g);
    const l = /^#\/list\/(refunds|reservations)(?:\?(.*))?$/.exec(location.hash);
    if (l) return showList(l[1], l[2] || '', g);
    const q = /^#\/search\/(.+)$/.exec(location.hash);
    if (q) return showSearch(decode(q[1]), g);
    const f = /^#\/refund\/([^/]+)\/([^/]+)$/.exec(location.hash);
    if (f) return showRefund(decode(f[1]), decode(f[2]), g);
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

  const refundHash = (id, refundNo) => '#/refund/' + seg(id) + '/' + seg(refundNo);
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
    $('whoami').textContent = who ? signedInAs(who) : '';
  }

  // signedInAs names the token's principal (ROLE:NAME) and the merchants
  // it sees: "signed in as operator:alice \u00b7 all merchants".
  function signedInAs(w) {
    const principal = w.principal.startsWith(w.role + ':') ? w.principal : w.role + ':' + w.principal;
    return 'signed in as ' + principal + ' \u00b7 ' + (w.merchants.length ? 'merchants ' + w.merchants.join(', ') : 'all merchants');
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

  function refundRow(r, withReservation, currency) {
    const tr = h('tr', { 'data-refund-no': r.refund_no, 'data-state': r.state });
    if (withReservation) {
      tr.append(h('td', { class: 'mono' }, h('a', { href: '#/reservation/' + seg(r.reservation_id) }, r.reservation_id)));
    }
    tr.append(
      h('td', { class: 'mono' }, h('a', { href: refundHash(r.reservation_id, r.refund_no), class: 'refund-link' }, r.refund_no)),
      h('td', { class: 'num' }, yuan(r.amount, currency)),
      h('td', { class: 'state-cell' }, stateBadge(r.state), r.stuck ? h('span', { class: 'tag' }, 'stuck') : null,
        r.conflicts ? h('span', { class: 'tag' }, 'conflicts ' + r.conflicts) : null),
      h('td', { class: 'message' }, r.code || '', r.message ? h('div', { class: 'muted' }, r.message) : null,
        approvalNote(r)),
      h('td', { class: 'reason' }, r.reason || '', r.reason_code ? h('span', { class: 'tag' }, r.reason_code) : null,
        r.metadata ? h('div', { class: 'muted' }, Object.entries(r.metadata).map(([k, v]) => k + '=' + v).join(', ')) : null),
      h('td', { class: 'num' }, String(r.attempts)),
      h('td', { class: 'when' }, at(r.updated_at),
        r.created_at ? h('div', { class: 'muted age' }, 'requested ' + ago(r.created_at)) : null),
      h('td', null, actions(r, tr, currency)));
    return tr;
  }

  // approvalNote says who asked for a refund held for approval, and who
  // decided it or until when it waits.
  function approvalNote(r) {
    if (!r.approval_required) return null;
    // Times (at) stay whole on narrow screens: a date is never split at its dashes.
    const parts = [['requested by ' + r.requested_by]];
    if (r.approved_by) parts.push(['approved by ' + r.approved_by, r.approved_at ? [' at ', at(r.approved_at)] : null]);
    if (r.rejected_by) parts.push(['rejected by ' + r.rejected_by]);
    if (r.approval_expires_at) parts.push(['expires ', at(r.approval_expires_at)]);
    return h('div', { class: 'muted approval' }, parts.map((p, i) => (i ? [' \u00b7 ', p] : p)));
  }

  // ACTIONS are the buttons the console offers, in order: the API's
  // next_step.actions says which the refund's state allows now, the
  // token's role which of those it may take. Each but reconcile, which
  // moves no money, is asked once more, naming the refund and its amount;
  // apply-abnormal asks with its payout fields (abnormalFields).
  const ACTIONS = [
    { action: 'reconcile', label: 'Reconcile', perm: 'operate', tone: 'primary', title: 'Ask WeChat about this refund now' },
    { action: 'approve', label: 'Approve', perm: 'approve', tone: 'primary', ask: true },
    { action: 'resubmit', label: 'Resubmit', perm: 'operate', ask: true, title: 'Send the same request to WeChat again' },
    { action: 'reject', label: 'Reject', perm: 'approve', tone: 'danger', ask: true, reason: 'required' },
    { action: 'abandon', label: 'Abandon', perm: 'operate', tone: 'danger', ask: true, reason: 'optional' },
    { action: 'resolve', label: 'Resolve', perm: 'operate', tone: 'danger', ask: true, reason: 'required' },
    { action: 'apply-abnormal', label: 'Apply abnormal refund', perm: 'operate', ask: true, fields: () => abnormalFields(),
      title: 'Have WeChat Pay pay it out to the user\u2019s bank card or the merchant\u2019s bank account' },
  ];

  // BANK_TYPES are the debit cards WeChat Pay pays an abnormal refund out
  // to: the API's list (reservation.ValidBankType; console_test.go checks
  // the two agree), which the API checks again.
  const BANK_TYPES = [
    'ABC_DEBIT', 'BOC_DEBIT', 'CCB_DEBIT', 'CEB_DEBIT', 'CIB_DEBIT', 'CITIC_DEBIT', 'CMBC_DEBIT', 'CMB_DEBIT',
    'COMM_DEBIT', 'GDB_DEBIT', 'ICBC_DEBIT', 'NBCB_DEBIT', 'PAB_DEBIT', 'PSBC_DEBIT', 'SPDB_DEBIT',
  ];

  // abnormalFields are the inputs of apply-abnormal: where to pay (the
  // user's bank card, with its bank, number and holder's name, or the
  // merchant's bank account). body() reads them for the request and
  // empties the card number and the name at once (clear() empties them on
  // Cancel): neither stays in the page, nor is it logged or shown. The API
  // checks every field and names the one it refuses.
  function abnormalFields() {
    const type = h('select', { name: 'type', 'aria-label': 'Pay out to' },
      h('option', { value: 'USER_BANK_CARD' }, 'the user\u2019s bank card'),
      h('option', { value: 'MERCHANT_BANK_CARD' }, 'the merchant\u2019s bank account'));
    const bank = h('select', { name: 'bank_type', 'aria-label': 'Bank' },
      h('option', { value: '' }, 'bank\u2026'), BANK_TYPES.map((b) => h('option', { value: b }, b)));
    const account = h('input', { name: 'bank_account', autocomplete: 'off', inputmode: 'numeric', spellcheck: 'false',
      maxlength: '30', placeholder: 'card number', 'aria-label': 'Card number' });
    const name = h('input', { name: 'real_name', autocomplete: 'off', spellcheck: 'false', maxlength: '214',
      placeholder: 'card holder\u2019s name', 'aria-label': 'Card holder\u2019s name' });
    const card = h('span', { class: 'bank-card inline' }, bank, account, name);
    type.addEventListener('change', () => { card.hidden = type.value !== 'USER_BANK_CARD'; });
    const clear = () => {
      account.value = '';
      name.value = '';
    };
    return {
      nodes: [type, card],
      clear,
      body() {
        const b = type.value === 'USER_BANK_CARD'
          ? { type: type.value, bank_type: bank.value, bank_account: account.value.trim(), real_name: name.value.trim() }
          : { type: type.value };
        clear();
        return b;
      },
    };
  }

  // samePerson says whether two principals (role:name) are one person, as
  // the API's four eyes does: the requester may not approve.
  const personOf = (p) => (p.includes(':') ? p.slice(p.indexOf(':') + 1) : p);
  const samePerson = (a, b) => !!a && !!b && personOf(a) === personOf(b);

  function actions(r, row, currency) {
    const box = h('div', { class: 'actions' });
    const allowed = r.next_step && Array.isArray(r.next_step.actions) ? r.next_step.actions : [];
    for (const a of ACTIONS) {
      if (!allowed.includes(a.action) || !may(a.perm)) continue;
      if (a.action === 'approve' && samePerson(who.principal, r.requested_by)) continue;
      if (!a.ask) {
        box.append(h('button', { type: 'button', class: a.tone, 'data-action': a.action, title: a.title,
          onclick: () => act(r, a.action, undefined, row) }, a.label));
        continue;
      }
      box.append(askOnce(a.action, a.label, what(a.label, r, currency), a.tone,
        (body) => act(r, a.action, body, row), a.reason, a.fields));
    }
    return box;
  }

  // what names the refund an action is about to change, for its
  // confirmation: number and amount.
  const what = (label, r, currency) => [label + ' ', h('span', { class: 'mono' }, r.refund_no), ' of ' + yuan(r.amount, currency) + '?'];

  async function act(r, action, body, row) {
    const buttons = row ? row.querySelectorAll('button') : [];
    for (const b of buttons) b.disabled = true;
    say(action + ' ' + r.refund_no + '\u2026', 'info');
    try {
      let now = await api('POST', refundPath(r) + '/' + action, body);
      if (!TERMINAL.has(now.state) && action !== 'resolve' && action !== 'abandon' && action !== 'reject') {
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

  // matchHash is where a search match leads: the refund's own page when
  // the id named a refund (refund number, WeChat refund_id), else the
  // reservation's page (its id, out_trade_no, transaction_id, user id).
  const matchHash = (m) => (m.refund_no ? refundHash(m.reservation.id, m.refund_no) : reservationHash(m.reservation.id));

  // showSearch looks q up as every kind of id (GET /v1/search, and the
  // reservation's own id): one match lands on the page of what it names
  // (matchHash); several are listed, each row leading there; none says so.
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
      location.replace(matchHash(matches[0]));
      return;
    }
    const title = h('div', { class: 'title-row' }, h('h1', null, 'Find ', h('span', { class: 'mono' }, q)));
    if (matches.length === 0) {
      box.replaceChildren(back(), title, h('p', { class: 'empty', id: 'search-none' },
        'No reservation or refund this token sees has this id. Ids are matched whole: a reservation id, refund number, ' +
        'out_trade_no, user id, transaction_id or WeChat refund_id.'));
      return;
    }
    const cols = ['Open', 'Found by', 'Reservation', 'Refund', 'State', 'Reason', 'Merchant', 'User', 'Order (out_trade_no)', 'Paid', 'Refunded'];
    const body = h('tbody');
    for (const m of matches) {
      const res = m.reservation;
      const r = m.refund_no ? res.refunds.find((x) => x.refund_no === m.refund_no) : null;
      body.append(h('tr', { 'data-reservation': res.id, 'data-refund-no': m.refund_no || undefined },
        h('td', null, h('a', { href: matchHash(m), class: 'search-open' }, m.refund_no ? 'Refund' : 'Reservation')),
        h('td', null, FOUND_BY[m.by] || m.by),
        h('td', { class: 'mono' }, h('a', { href: reservationHash(res.id) }, res.id)),
        h('td', { class: 'mono' }, m.refund_no ? h('a', { href: refundHash(res.id, m.refund_no) }, m.refund_no) : ''),
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
    // A redraw of the reservation shown (a refresh) keeps the page as it
    // is until the new one is ready, so the reader keeps their place.
    const fresh = box.dataset.id !== id || box.dataset.focus !== (focusNo || '');
    box.dataset.focus = focusNo || '';
    if (box.dataset.id !== id) box.replaceChildren(h('p', { class: 'muted' }, 'Loading reservation ', h('span', { class: 'mono' }, id), '\u2026'));
    box.dataset.id = id;
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
    fact('Paid', yuan(res.amount, res.currency));
    fact('Refunded', yuan(res.refunded, res.currency));
    fact('In flight', yuan(res.in_flight, res.currency));
    fact('Refundable', yuan(res.refundable, res.currency));
    if (res.paid_at) fact('Paid at', at(res.paid_at));
    fact('Registered', at(res.registered_at));

    const refunds = h('div', { class: 'panel' }, h('h2', null, 'Refunds'));
    if (res.refunds.length === 0) {
      refunds.append(h('p', { class: 'empty' }, 'No refunds.'));
    } else {
      const body = h('tbody');
      for (const r of res.refunds) {
        const row = refundRow(r, false, res.currency);
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
            h('span', { class: 'muted' }, at(ev.at)),
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
    // Scrolled to once: a refresh keeps the reader where they are.
    const focused = box.querySelector('tr.focus');
    if (focused && fresh) focused.scrollIntoView({ block: 'center' });
  }

  // --- refund page ---------------------------------------------------------

  // A refund's page (#/refund/RESERVATION/REFUND_NO): what happens next and
  // who must act (the API's next_step), its actions for this role, its
  // whole story in words from the reservation's journal, and the raw
  // events behind a toggle.

  // NEXT says in words what a next_step kind means; at is the time shown.
  const NEXT = {
    none: { who: 'nobody', text: () => 'Nothing more happens: the refund is final.' },
    submit_at: { who: 'refundd', text: (n) => (n.at ? ['refundd submits it to WeChat at ', at(n.at), soon(n.at)] : 'refundd is submitting it to WeChat.') },
    retry_at: { who: 'refundd', text: (n) => ['refundd sends the same request to WeChat again at ', at(n.at), soon(n.at)] },
    recheck_at: { who: 'refundd (WeChat must answer)', text: (n) => ['refundd asks WeChat about it at ', at(n.at), soon(n.at)] },
    wait_for_wechat: { who: 'WeChat', text: (n) => ['WeChat\u2019s notification is awaited; refundd asks at ', at(n.at), soon(n.at), ' if none comes'] },
    operator_must_act: { who: 'an operator', text: (n) => (n.at ? ['Meanwhile refundd asks WeChat again at ', at(n.at), soon(n.at)] : 'Nothing is scheduled.') },
    approver_must_act: { who: 'an approver (not the requester)', text: (n) => ['Unapproved, it expires at ', at(n.at), soon(n.at)] },
  };

  // soon is " (in 4 min)" or " (due now)" after a time.
  function soon(t) {
    const d = new Date(t).getTime() - Date.now();
    return h('span', { class: 'muted' }, Number.isNaN(d) ? '' : d > 0 ? ' (' + ago(t) + ')' : ' (due now)');
  }

  // OUTCOME says what WeChat's answer meant.
  const OUTCOME = {
    SUCCEEDED: 'refunded', PROCESSING: 'accepted, processing', FAILED: 'closed the refund', ABNORMAL: 'could not return the money (abnormal)',
    REJECTED: 'refused it', UNKNOWN: 'no clear answer', NOT_FOUND: 'has no such refund',
  };

  const code = (d) => (d.code ? [' \u00b7 code ', h('span', { class: 'mono' }, d.code)] : null);
  const msg = (d) => (d.message ? [' \u00b7 \u201c', d.message, '\u201d'] : null);
  const by = (ev) => h('span', { class: 'by' }, ev.by);
  const operatorish = (ev) => ev.by !== 'engine' && !ev.by.startsWith('provider:');

  // story turns one journaled event of the refund into a sentence (nodes).
  // seen counts the submissions before it: only a later one, made by a
  // person, is a resubmission (the first is journaled under the requester).
  function story(ev, currency, seen) {
    const d = ev.data || {};
    const resubmitted = seen.submissions > 0 && operatorish(ev) ? ['Resubmitted by ', by(ev), ': '] : '';
    if (ev.type === 'refund.submission_started') seen.submissions++;
    switch (ev.type) {
      case 'refund.requested':
        return ['Requested by ', by(ev), ': ', yuan(d.amount, currency), d.reason ? [' \u00b7 reason \u201c', d.reason, '\u201d'] : null,
          d.reason_code ? [' ', h('span', { class: 'tag info' }, d.reason_code)] : null];
      case 'refund.approval_requested':
        return ['Held for approval (rule: ' + d.rule + '); nothing sent to WeChat. Expires at ', at(d.due_at)];
      case 'refund.approved':
        return ['Approved by ', by(ev), ' (requested by ' + d.requested_by + ')'];
      case 'refund.rejected':
        return ['Rejected by ', by(ev), ': \u201c', d.reason || '', '\u201d; its amount is released'];
      case 'refund.approval_expired':
        return 'Nobody approved it in time: expired, its amount released';
      case 'refund.submission_started':
        return [resubmitted, 'attempt ' + d.attempt + ' sent to WeChat',
          d.due_at ? [' \u00b7 checked at ', at(d.due_at), ' if no answer'] : null];
      case 'refund.submission_scheduled':
        return [resubmitted, 'submission held back by WeChat\u2019s spacing until ', at(d.due_at)];
      case 'refund.query_started':
        return [operatorish(ev) ? ['Reconcile by ', by(ev), ': '] : '', 'query ' + d.query + ': refundd asked WeChat',
          d.due_at ? [' \u00b7 next check ', at(d.due_at)] : null];
      case 'refund.provider_result': {
        const src = d.source === 'response' ? 'WeChat answered attempt ' + (d.attempt || '?')
          : d.source === 'query' ? 'WeChat answered the query' : 'WeChat notified';
        return [src + ': ' + (OUTCOME[d.outcome] || d.outcome), code(d), msg(d),
          d.from !== d.to ? [' \u2192 ', stateBadge(d.to)] : null,
          d.retry && d.due_at ? [' \u00b7 retry at ', at(d.due_at)] : null];
      }
      case 'refund.abandoned':
        return ['Abandoned by ', by(ev), d.reason ? [': \u201c', d.reason, '\u201d'] : '', '; its amount is released'];
      case 'refund.resolved':
        return ['Resolved by ', by(ev), ': \u201c', d.reason || '', '\u201d; counts as refunded'];
      case 'refund.conflict':
        return ['WeChat reported ' + d.outcome + ' (' + d.source + ') after it was ', stateBadge(d.state), code(d), ': not applied, an operator should look'];
      case 'refund.flagged_stuck':
        return 'Flagged stuck: unresolved longer than the policy allows';
      case 'refund.recovered':
        return ['Found at WeChat after a restore: ', stateBadge(d.state), ' ', yuan(d.amount, currency)];
      case 'refund.abnormal_applied':
        return ['Pay-out requested by ', by(ev), ': WeChat asked to pay it to ' + (d.type === 'USER_BANK_CARD' ? 'the user\u2019s bank card' : 'the merchant\u2019s bank account')];
      default:
        return ev.type;
    }
  }

  // attemptsLabel says what next_step.attempts_left counts in a state.
  function attemptsLabel(state) {
    if (state === 'UNKNOWN') return 'Resends left if WeChat has no such refund: ';
    if (state === 'PROCESSING' || state === 'PENDING_APPROVAL') return 'Attempts left before it is left UNKNOWN: ';
    return 'Attempts left: ';
  }

  async function showRefund(id, no, g) {
    show('refund');
    document.title = 'Refund ' + no + ' \u2013 refundd console';
    const box = $('refund');
    const key = id + '/' + no;
    if (box.dataset.key !== key) box.replaceChildren(h('p', { class: 'muted' }, 'Loading refund ', h('span', { class: 'mono' }, no), '\u2026'));
    box.dataset.key = key;
    const back = h('p', null, h('a', { href: reservationHash(id, no) }, '\u2190 Reservation ', h('span', { class: 'mono' }, id)));
    let res;
    let events = null;
    let timelineError = null;
    try {
      res = await api('GET', '/v1/reservations/' + seg(id));
      events = (await api('GET', '/v1/reservations/' + seg(id) + '/events')).events.filter((ev) => ev.refund_no === no);
    } catch (e) {
      if (stale(g)) return;
      if (!res) {
        box.replaceChildren(back, h('p', { class: 'error' }, 'Refund ', h('span', { class: 'mono' }, no), ': ' + e.message));
        explain(e, 'Refund');
        return;
      }
      timelineError = e;
    }
    if (stale(g)) return;
    const r = res.refunds.find((x) => x.refund_no === no);
    if (!r) {
      box.replaceChildren(back, h('p', { class: 'error', id: 'refund-none' }, 'Reservation ', h('span', { class: 'mono' }, id), ' has no refund ',
        h('span', { class: 'mono' }, no), '.'));
      return;
    }
    const cur = res.currency;
    const n = r.next_step || { kind: 'none', actions: [], why: '', attempts_left: 0 };
    const words = NEXT[n.kind] || { who: 'an operator', text: () => '' };
    const requested = events ? events.find((ev) => ev.type === 'refund.requested') : null;

    const now = h('div', { class: 'panel now', id: 'refund-now', 'data-kind': n.kind },
      h('h2', null, 'Why it is ', stateBadge(r.state), r.stuck ? h('span', { class: 'tag' }, 'stuck') : null),
      h('p', { class: 'why', id: 'refund-why' }, n.why),
      h('ul', { class: 'next' },
        h('li', { id: 'refund-next' }, h('span', { class: 'label' }, 'Next: '), words.text(n)),
        h('li', { id: 'refund-who' }, h('span', { class: 'label' }, 'Who must act: '), words.who),
        n.kind !== 'none' ? h('li', { id: 'refund-attempts' }, h('span', { class: 'label' }, attemptsLabel(r.state)), String(n.attempts_left),
          h('span', { class: 'muted' }, ' (' + r.attempts + ' made)')) : null,
        n.abandon_from ? h('li', null, h('span', { class: 'label' }, 'Abandon possible from: '), at(n.abandon_from), soon(n.abandon_from)) : null),
      h('div', { class: 'refund-actions' }, actions(r, null, cur)));

    const facts = h('dl', { class: 'facts' });
    const fact = (k, v) => facts.append(h('dt', null, k), h('dd', null, v));
    fact('Amount', yuan(r.amount, cur));
    fact('Requested', [at(r.created_at), ' ', h('span', { class: 'muted age' }, 'requested ' + ago(r.created_at)),
      requested ? [' by ', h('span', { class: 'by' }, requested.by)] : null]);
    if (r.reason) fact('Reason', h('span', { class: 'reason' }, r.reason));
    if (r.reason_code) fact('Reason code', r.reason_code);
    if (r.metadata) fact('Metadata', Object.entries(r.metadata).map(([k, v]) => k + '=' + v).join(', '));
    if (r.code) fact('Last code', [h('span', { class: 'mono' }, r.code), r.message ? [' ', h('span', { class: 'muted' }, r.message)] : null]);
    if (r.provider_refund_id) fact('WeChat refund id', h('span', { class: 'mono' }, r.provider_refund_id));
    fact('Updated', [at(r.updated_at), ' ', h('span', { class: 'muted age' }, ago(r.updated_at))]);
    if (r.succeeded_at) fact('Succeeded', at(r.succeeded_at));
    if (r.approval_required) fact('Approval', approvalNote(r));
    fact('Reservation', [h('a', { href: reservationHash(id, no), class: 'mono' }, id), ' \u00b7 ' + res.merchant + ' \u00b7 order ',
      h('span', { class: 'mono' }, res.out_trade_no), ' \u00b7 user ', h('span', { class: 'mono' }, res.user_id)]);

    const storyBox = h('div', { class: 'panel', id: 'refund-story' }, h('h2', null, 'Its story'));
    const raw = h('details', { id: 'refund-raw' }, h('summary', null, 'Raw events'));
    if (timelineError) {
      storyBox.append(h('p', { class: 'error' }, 'Journal unavailable: ' + timelineError.message));
    } else {
      const seen = { submissions: 0 };
      storyBox.append(h('ol', { class: 'story' }, events.map((ev) => h('li', { 'data-type': ev.type, 'data-seq': ev.seq },
        h('div', { class: 'story-when' }, at(ev.at), h('div', { class: 'muted age' }, ago(ev.at))),
        h('div', { class: 'story-what' }, story(ev, cur, seen))))));
      raw.append(h('ol', { class: 'timeline' }, events.map((ev) => h('li', { 'data-type': ev.type },
        h('div', { class: 'ev-head' }, h('span', { class: 'mono muted' }, '#' + ev.seq), h('span', { class: 'ev-type' }, ev.type),
          h('span', { class: 'muted' }, at(ev.at)), h('span', { class: 'muted' }, 'by ' + ev.by)),
        h('pre', { class: 'ev-data' }, JSON.stringify(ev.data, null, 1))))));
      storyBox.append(raw);
    }
    // A redraw keeps the raw events open if they were.
    const open = box.querySelector('#refund-raw');
    if (open && open.open) raw.open = true;
    box.replaceChildren(back,
      h('div', { class: 'title-row' }, h('h1', null, 'Refund ', h('span', { class: 'mono' }, r.refund_no)), stateBadge(r.state),
        h('span', { class: 'amount' }, yuan(r.amount, cur)),
        h('button', { type: 'button', id: 'refresh-refund', onclick: () => refreshView() }, 'Refresh')),
      now, h('div', { class: 'panel' }, facts), storyBox);
  }

  // --- operations ----------------------------------------------------------

  // The operations view shows what the API keeps about the service itself:
  // webhook endpoints and their parked events, the notification
  // quarantine, the audit head and the WeChat Pay credentials. Each section
  // is drawn only for a role that may call its route; others get a line
  // saying so.

  async function showOps(g) {
    show('ops');
    document.title = 'Operations \u2013 refundd console';
    const sections = await Promise.all([
      opsSection(g, 'ops-webhooks', 'Webhooks', 'read', true, opsWebhooks),
      opsSection(g, 'ops-quarantine', 'Notification quarantine', 'operate', true, opsQuarantine),
      opsSection(g, 'ops-audit', 'Audit head', 'audit', true, opsAudit),
      opsSection(g, 'ops-credentials', 'Credentials', 'operate', true, opsCredentials),
      opsSection(g, 'ops-counters', 'Counters since the journal began', 'read', true, opsCounters),
      opsSection(g, 'ops-totals', 'Refund totals', 'read', false, opsTotals),
    ]);
    if (stale(g)) return;
    $('ops').replaceChildren(
      h('div', { class: 'title-row' }, h('h1', null, 'Operations'),
        h('button', { type: 'button', id: 'refresh-ops', onclick: () => refreshView() }, 'Refresh')),
      ...sections);
  }

  // opsSection is one panel: the role's refusal, the route's absence, an
  // error, or what fill draws from the API.
  async function opsSection(g, id, title, perm, unscopedOnly, fill) {
    const sec = h('section', { class: 'panel ops', id });
    sec.append(h('h2', null, title));
    const role = who ? who.role : 'no token';
    if (!may(perm)) {
      sec.append(h('p', { class: 'denied muted' }, 'The role ' + role + ' may not see this.'));
      return sec;
    }
    if (unscopedOnly && who.merchants.length) {
      sec.append(h('p', { class: 'denied muted' }, 'A token limited to merchants may not see this: it concerns every merchant.'));
      return sec;
    }
    try {
      await fill(sec, g);
    } catch (e) {
      if (e.status === 404 && e.code === 'route_not_found') {
        sec.append(h('p', { class: 'empty' }, 'Not enabled on this server.'));
      } else if (e.status === 403) {
        sec.append(h('p', { class: 'denied muted' }, 'The role ' + role + ' may not see this (' + e.message + ').'));
      } else {
        sec.append(h('p', { class: 'error' }, e.message));
        if (!stale(g)) explain(e, title);
      }
    }
    return sec;
  }

  function table(cols, rows) {
    return h('div', { class: 'table-scroll' },
      h('table', null, h('thead', null, h('tr', null, cols.map((c) => h('th', null, c)))), h('tbody', null, rows)));
  }

  // askOnce is a button that asks once more, with question, before it
  // calls go(body, button): the console's one confirmation. With reason
  // ('required' or 'optional') the question comes with a reason field,
  // sent as {reason}. With fields (a function returning {nodes, body(),
  // clear()}, as abnormalFields) it comes with those inputs instead:
  // body() is what is sent, once; Cancel calls clear().
  function askOnce(action, label, question, tone, go, reason, fields) {
    const wrap = h('span', { class: 'ask' });
    const open = h('button', { type: 'button', class: tone, 'data-action': action }, label + '\u2026');
    open.addEventListener('click', () => {
      const input = reason ? h('input', { maxlength: '80', placeholder: reason === 'required' ? 'reason (required)' : 'reason',
        'aria-label': label + ' reason' }) : null;
      const more = fields ? fields() : null;
      const yes = h('button', { type: 'submit', class: tone, 'data-action': action + '-confirm' }, label);
      const form = h('form', { class: 'confirm-box', autocomplete: more ? 'off' : null, 'data-form': action },
        h('span', { class: 'confirm' }, question), input, more ? more.nodes : null, yes,
        h('button', { type: 'button', onclick: () => { if (more) more.clear(); wrap.replaceChildren(open); } }, 'Cancel'));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        if (more) {
          // Sent once: the view is drawn again after it (act).
          yes.disabled = true;
          go(more.body(), yes);
          return;
        }
        const text = input ? input.value.trim() : '';
        if (reason === 'required' && !text) {
          say(label + ' needs a reason.', 'error');
          input.focus();
          return;
        }
        go(text ? { reason: text } : undefined, yes);
      });
      wrap.replaceChildren(form);
      (input || (more && more.nodes[0]) || yes).focus();
    });
    wrap.append(open);
    return wrap;
  }

  async function replay(path, what, button) {
    button.disabled = true;
    say('Replaying ' + what + '\u2026', 'info');
    try {
      const res = await api('POST', path);
      say(typeof res.replaying === 'number'
        ? 'Replaying ' + res.replaying + ' parked event' + (res.replaying === 1 ? '' : 's') + ' of ' + res.endpoint + '.'
        : 'Replaying ' + what + ': queued for delivery.', 'ok');
    } catch (e) {
      explain(e, 'Replay ' + what);
    }
    await refreshView();
  }

  async function opsWebhooks(sec, g) {
    const { endpoints } = await api('GET', '/v1/webhooks');
    if (stale(g)) return;
    sec.append(h('p', { class: 'help' }, 'An event is parked when its endpoint kept refusing it; later events of the same reservation wait behind it. Replay sends it again.'));
    if (!endpoints.length) {
      sec.append(h('p', { class: 'empty' }, 'No webhook endpoints configured.'));
      return;
    }
    sec.append(table(['Endpoint', 'Events behind', 'Parked', 'Oldest undelivered', 'Delivered', 'Failed attempts'],
      endpoints.map((ep) => h('tr', { 'data-endpoint': ep.name },
        h('td', { class: 'mono' }, ep.name),
        h('td', { class: 'num' }, String(ep.events_behind)),
        h('td', { class: 'num' }, String(ep.parked), ep.parked > 0 ? h('span', { class: 'tag' }, 'parked') : null),
        h('td', { class: 'num' }, ep.oldest_undelivered_age_seconds ? span(ep.oldest_undelivered_age_seconds) : '\u2013'),
        h('td', { class: 'num' }, String(ep.delivered)),
        h('td', { class: 'num' }, String(ep.failed_attempts))))));
    const lists = await Promise.all(endpoints.map(async (ep) => {
      const path = '/v1/webhooks/' + seg(ep.name) + '/parked';
      const box = h('div', { class: 'parked', 'data-endpoint': ep.name });
      const { parked } = await api('GET', path);
      const head = h('div', { class: 'title-row' }, h('h3', null, 'Parked at ', h('span', { class: 'mono' }, ep.name), ' ',
        h('span', { class: 'count' }, String(parked.length))));
      box.append(head);
      if (!parked.length) {
        box.append(h('p', { class: 'empty' }, 'None parked.'));
        return box;
      }
      if (may('operate')) {
        head.append(askOnce('replay-all', 'Replay all', 'Replay all ' + parked.length + ' parked events of ' + ep.name + '?', 'primary',
          (_, b) => replay(path + '/replay', 'every parked event of ' + ep.name, b)));
      }
      // The event and its button come first, so that both stay in view
      // on a narrow screen.
      box.append(table(['Event', 'Refund', 'Delivery', 'Parked'],
        parked.map((p) => {
          const ev = p.event;
          const acts = h('div', { class: 'actions' });
          if (p.replaying) acts.append(h('span', { class: 'tag info' }, 'replaying'));
          else if (may('operate')) {
            acts.append(askOnce('replay', 'Replay', ['Replay ', h('span', { class: 'mono' }, ev.id), ' (' + ev.type + ') to ' + ep.name + '?'], 'primary',
              (_, b) => replay(path + '/' + seg(ev.id) + '/replay', ev.id, b)));
          }
          return h('tr', { 'data-event-id': ev.id },
            h('td', { class: 'event' }, h('div', { class: 'mono' }, ev.id), h('div', { class: 'nowrap' }, ev.type), acts),
            h('td', { class: 'nowrap' }, h('div', { class: 'mono' }, ev.refund_no || ''),
              h('div', null, h('a', { class: 'mono', href: '#/reservation/' + seg(ev.reservation_id) }, ev.reservation_id)),
              ev.refund_no ? h('div', null, yuan(ev.amount, ev.currency)) : null),
            h('td', { class: 'message' }, h('div', { class: 'muted' }, p.attempts + ' attempt' + (p.attempts === 1 ? '' : 's')), p.last_error || '',
              p.held_behind ? h('div', { class: 'muted' }, 'waits behind ', h('span', { class: 'mono' }, p.held_behind)) : null),
            h('td', { class: 'when-wrap' }, at(p.parked_at), h('div', { class: 'muted age' }, ago(p.parked_at))));
        })));
      return box;
    }));
    if (!stale(g)) sec.append(...lists);
  }

  // --- durable counters and totals ---------------------------------------

  // opsCounters shows the counters GET /v1/summary reads from the journal
  // (they survive restarts): notifications by outcome and merchant,
  // provider calls by outcome and code class, webhook deliveries.
  async function opsCounters(sec, g) {
    const s = await api('GET', '/v1/summary');
    if (stale(g)) return;
    if (!s.counters_durable) {
      sec.append(h('p', { class: 'empty' }, 'This server keeps no durable counters.'));
      return;
    }
    sec.append(h('p', { class: 'help' }, 'Kept in the journal beside the events, summed over every node: they survive restarts.'));
    const n = s.notifications || {};
    const outcomes = ['applied', 'duplicate', 'hint', 'probe', 'rejected', 'unknown_refund', 'mismatch', 'error'];
    const byMerchant = s.notifications_by_merchant || {};
    sec.append(h('h3', null, 'Notifications'),
      table(['Merchant', ...outcomes], [
        h('tr', { 'data-counter': 'notifications', 'data-merchant': '' }, h('td', null, 'All'),
          outcomes.map((o) => h('td', { class: 'num', 'data-outcome': o }, String(n[o] || 0)))),
        ...Object.keys(byMerchant).sort().map((m) => h('tr', { 'data-counter': 'notifications', 'data-merchant': m },
          h('td', { class: 'mono' }, m), outcomes.map((o) => h('td', { class: 'num', 'data-outcome': o }, String(byMerchant[m][o] || 0))))),
      ]),
      h('p', { class: 'muted', 'data-counter': 'quarantined' }, 'Refused and kept in the quarantine: ' + String(s.notifications_quarantined || 0)));
    const calls = s.provider_calls || {};
    const codes = s.provider_code_classes || {};
    const kinds = ['SUCCEEDED', 'PROCESSING', 'FAILED', 'ABNORMAL', 'REJECTED', 'UNKNOWN', 'NOT_FOUND', 'OTHER'];
    const classes = ['none', 'http', 'client', 'provider'];
    const ops = [...new Set([...Object.keys(calls), ...Object.keys(codes)])].sort();
    sec.append(h('h3', null, 'Provider calls'), ops.length
      ? table(['Call', ...kinds, ...classes.map((c) => 'code: ' + c)],
        ops.map((op) => h('tr', { 'data-counter': 'provider', 'data-op': op }, h('td', { class: 'mono' }, op),
          kinds.map((k) => h('td', { class: 'num', 'data-outcome': k }, String((calls[op] || {})[k] || 0))),
          classes.map((c) => h('td', { class: 'num', 'data-class': c }, String((codes[op] || {})[c] || 0))))))
      : h('p', { class: 'empty' }, 'No provider calls yet.'));
    const hooks = s.webhook_deliveries || {};
    const names = Object.keys(hooks).sort();
    sec.append(h('h3', null, 'Webhook deliveries'), names.length
      ? table(['Endpoint', 'Delivered', 'Failed POSTs', 'Parked'],
        names.map((name) => h('tr', { 'data-counter': 'webhook', 'data-endpoint': name }, h('td', { class: 'mono' }, name),
          ['delivered', 'failed', 'parked'].map((k) => h('td', { class: 'num', 'data-outcome': k }, String(hooks[name][k] || 0))))))
      : h('p', { class: 'empty' }, 'No webhook deliveries yet.'));
  }

  // totalsRange is [from, to) of a named range in the chosen zone, on
  // whole hours (the totals' grain): '' for all time.
  const TOTALS_RANGES = [['all', 'All time'], ['today', 'Today'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days']];
  let totalsChoice = 'all';

  function totalsRange(choice) {
    if (choice === 'all') return '';
    const offset = beijing() ? 8 * 3600 * 1000 : 0;
    const day = 24 * 3600 * 1000;
    // Midnight of today in the zone, as an instant.
    const start = Math.floor((Date.now() + offset) / day) * day - offset;
    const days = choice === '7d' ? 6 : choice === '30d' ? 29 : 0;
    const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
    return '?from=' + seg(iso(start - days * day)) + '&to=' + seg(iso(start + day));
  }

  // opsTotals shows GET /v1/totals: money in flight, refunded and released
  // by merchant, for the refunds requested in the chosen range.
  async function opsTotals(sec, g) {
    const t = await api('GET', '/v1/totals' + totalsRange(totalsChoice));
    if (stale(g)) return;
    const pick = h('select', { id: 'totals-range' }, TOTALS_RANGES.map(([v, label]) => h('option', { value: v }, label)));
    pick.value = totalsChoice;
    pick.addEventListener('change', () => {
      totalsChoice = pick.value;
      refreshView();
    });
    sec.append(h('p', { class: 'help' }, 'Refunds requested in the range, by the state they are in now; days in the zone chosen above.'),
      h('div', { class: 'inline' }, h('label', { for: 'totals-range' }, 'Requested'), pick));
    const cell = (x, kind) => h('td', { class: 'num', 'data-total': kind }, yuan(x.amount), h('div', { class: 'muted' }, String(x.refunds) + ' refund' + (x.refunds === 1 ? '' : 's')));
    const rows = t.merchants.map((m) => h('tr', { 'data-merchant': m.merchant }, h('td', { class: 'mono' }, m.merchant),
      cell(m.in_flight, 'in_flight'), cell(m.refunded, 'refunded'), cell(m.released, 'released'),
      h('td', null, Object.keys(m.states).sort().map((st) => h('div', { class: 'nowrap' }, stateBadge(st), ' ' + m.states[st].refunds + ' \u00b7 ' + yuan(m.states[st].amount))))));
    if (t.merchants.length > 1) {
      rows.push(h('tr', { 'data-merchant': '' }, h('td', null, 'All'), cell(t.in_flight, 'in_flight'), cell(t.refunded, 'refunded'),
        cell(t.released, 'released'), h('td', null)));
    }
    sec.append(rows.length ? table(['Merchant', 'In flight', 'Refunded', 'Released (failed)', 'By state'], rows)
      : h('p', { class: 'empty' }, 'No refunds requested in this range.'));
  }

  async function opsQuarantine(sec, g) {
    const { entries } = await api('GET', '/v1/notify/quarantine');
    if (stale(g)) return;
    sec.append(h('p', { class: 'help' }, 'WeChat Pay notifications that were not applied, kept byte for byte on disk (newest first, up to 100 listed).'));
    if (!entries.length) {
      sec.append(h('p', { class: 'empty' }, 'Nothing quarantined.'));
      return;
    }
    sec.append(table(['Received', 'Reason', 'Endpoint', 'File'],
      entries.map((q) => h('tr', { 'data-name': q.name },
        h('td', { class: 'when-wrap' }, at(q.at), h('div', { class: 'muted age' }, ago(q.at))),
        h('td', null, h('span', { class: 'tag' }, q.reason)),
        h('td', { class: 'message' }, q.endpoint),
        h('td', null, h('div', { class: 'mono nowrap' }, q.name), h('div', { class: 'muted' }, String(q.size) + ' bytes'))))));
  }

  async function opsAudit(sec, g) {
    const v = await api('GET', '/v1/audit/head');
    if (stale(g)) return;
    const facts = h('dl', { class: 'facts' });
    const fact = (k, val) => facts.append(h('dt', null, k), h('dd', null, val));
    const hash = (x) => h('span', { class: 'mono hash' }, String(x));
    fact('Head', ['record ' + v.head.global + ' at ', at(v.head.time)]);
    fact('Head hash', hash(v.head.hash));
    if (v.checkpoint) {
      fact('Last checkpoint', ['record ' + v.checkpoint.global + ' at ', at(v.checkpoint.time), ' ',
        h('span', { class: 'muted' }, v.checkpoint.key_id ? 'signed by ' + v.checkpoint.key_id : 'unsigned')]);
      fact('Checkpoint hash', hash(v.checkpoint.hash));
    } else {
      fact('Last checkpoint', h('span', { class: 'muted' }, 'none yet'));
    }
    fact('Epoch', String(v.epoch));
    fact('Reconcile required', v.reconcile_required
      ? h('span', { class: 'tag' }, 'yes: refunds are paused until the restored journal is reconciled')
      : 'no');
    sec.append(facts);
  }

  const DAY = 24 * 3600 * 1000;

  // expiry says how long a key has left, flagged under 30 days.
  function expiry(notAfter) {
    if (!notAfter) return h('span', { class: 'muted' }, 'no expiry');
    const days = Math.floor((new Date(notAfter).getTime() - Date.now()) / DAY);
    if (days < 0) return h('span', { class: 'tag expiring' }, 'expired ' + -days + ' days ago');
    const text = 'expires in ' + days + ' day' + (days === 1 ? '' : 's');
    return days < 30 ? h('span', { class: 'tag expiring' }, text) : h('span', { class: 'muted' }, text);
  }

  async function opsCredentials(sec, g) {
    const { accounts } = await api('GET', '/v1/admin/credentials');
    if (stale(g)) return;
    if (!accounts.length) {
      sec.append(h('p', { class: 'empty' }, 'No WeChat Pay accounts configured.'));
      return;
    }
    for (const a of accounts) {
      const box = h('div', { class: 'account', 'data-account': a.account });
      box.append(h('h3', null, a.account, ' ', h('span', { class: 'muted mono' }, 'mchid ' + a.mchid)),
        h('p', { class: 'muted' }, 'API certificate ', h('span', { class: 'mono' }, a.merchant_serial || '\u2013'),
          ' \u00b7 APIv3 key ' + (a.apiv3_key ? 'loaded' : 'missing') + ' \u00b7 APIv2 key ' + (a.apiv2_key ? 'loaded' : 'none')));
      const kind = (k) => (k === 'public_key' ? 'public key' : k === 'platform_certificate' ? 'platform certificate' : k);
      box.append(table(['Key', 'Expiry', 'Not after', 'Not before'],
        a.keys.map((k) => h('tr', { 'data-serial': k.serial },
          h('td', null, h('div', { class: 'mono' }, k.serial), h('div', { class: 'muted' }, kind(k.kind) + ' \u00b7 from ' + k.source)),
          h('td', { class: 'nowrap' }, expiry(k.not_after)),
          h('td', { class: 'when-wrap' }, at(k.not_after)),
          h('td', { class: 'when-wrap' }, at(k.not_before))))));
      const d = a.download;
      if (d) {
        const facts = h('dl', { class: 'facts download' });
        const fact = (k, val) => facts.append(h('dt', null, k), h('dd', null, val));
        fact('Certificate download', 'every ' + d.refresh);
        fact('Last success', d.last_success ? [at(d.last_success), ' ', h('span', { class: 'muted' }, ago(d.last_success))] : h('span', { class: 'tag' }, 'never'));
        if (d.last_attempt) fact('Last attempt', [at(d.last_attempt), ' ', h('span', { class: 'muted' }, ago(d.last_attempt))]);
        if (d.last_error) fact('Last error', h('span', { class: 'error' }, d.last_error));
        fact('Downloads', String(d.downloads) + ' \u00b7 failures ' + d.failures +
          (d.consecutive_failures ? ' (' + d.consecutive_failures + ' in a row)' : '') +
          ' \u00b7 on demand ' + d.on_demand + (d.on_demand_dropped ? ' (' + d.on_demand_dropped + ' dropped)' : ''));
        box.append(facts);
      }
      sec.append(box);
    }
  }

  // --- lists: refunds and reservations -----------------------------------
  //
  // #/list/refunds?FILTERS and #/list/reservations?FILTERS show a page of
  // GET /v1/refunds or GET /v1/reservations; FILTERS are the API's own
  // query parameters, cursor included, so a link or a reload shows the
  // same page. The rows reach the page as text (h), and the CSV export is
  // built from the rows the API answered, never from the page's HTML.

  const LIST_FILTERS = {
    refunds: [
      ['refund_no', 'Refund number'], ['out_trade_no', 'Order (out_trade_no)'], ['transaction_id', 'Transaction id'],
      ['refund_id', 'WeChat refund id'], ['user_id', 'User id'], ['merchant', 'Merchants', 'a,b'],
      ['state', 'States', 'UNKNOWN,PROCESSING'], ['requested_from', 'Requested from', '2026-12-05T00:00:00+08:00'],
      ['requested_to', 'Requested before', 'RFC 3339'], ['updated_from', 'Updated from', 'RFC 3339'],
      ['updated_to', 'Updated before', 'RFC 3339'], ['amount_min', 'Amount at least', 'fen'],
      ['amount_max', 'Amount at most', 'fen'], ['reason_code', 'Reason code'],
    ],
    reservations: [
      ['out_trade_no', 'Order (out_trade_no)'], ['transaction_id', 'Transaction id'], ['user_id', 'User id'],
      ['merchant', 'Merchants', 'a,b'], ['status', 'Status', 'ACCEPTED,CANCELED'], ['refund_state', 'With a refund in', 'UNKNOWN,REJECTED'],
      ['registered_from', 'Registered from', '2026-12-05T00:00:00+08:00'], ['registered_to', 'Registered before', 'RFC 3339'],
      ['updated_from', 'Updated from', 'RFC 3339'], ['updated_to', 'Updated before', 'RFC 3339'],
      ['amount_min', 'Amount at least', 'fen'], ['amount_max', 'Amount at most', 'fen'],
    ],
  };
  // A reconcile asks WeChat Pay about a refund whose outcome is open.
  const RECONCILABLE = new Set(['UNKNOWN', 'PROCESSING']);
  // listTrail keeps, per list and filters, the cursors of the pages before
  // the one shown: Previous goes back through them.
  const listTrail = new Map();
  // listAmountOrder sorts the rows of the page shown by amount: '', 'asc'
  // or 'desc' (time is the API's order, across pages).
  let listAmountOrder = '';
  // listRows are the rows of the page shown, as the API answered them.
  let listRows = [];

  const listHash = (kind, params) => '#/list/' + kind + (params.toString() ? '?' + params.toString() : '');

  function listBase(kind, params) {
    const p = new URLSearchParams(params);
    p.delete('cursor');
    return kind + '?' + p.toString();
  }

  async function showList(kind, qs, g) {
    show('list');
    for (const a of document.querySelectorAll('#views a')) a.classList.toggle('current', a.dataset.view === 'list-' + kind);
    document.title = (kind === 'refunds' ? 'Refunds' : 'Reservations') + ' \u2013 refundd console';
    const params = new URLSearchParams(qs);
    const box = $('list');
    const form = listFilterForm(kind, params);
    const head = h('div', { class: 'title-row' }, h('h1', null, kind === 'refunds' ? 'Refunds' : 'Reservations'));
    // A lone state of an attention kind would be the attention list: the
    // console always names the order.
    const query = new URLSearchParams(params);
    if (!query.has('order')) query.set('order', 'desc');
    let page;
    try {
      page = await api('GET', '/v1/' + kind + '?' + query.toString());
    } catch (e) {
      if (stale(g)) return;
      box.replaceChildren(head, form, h('p', { class: 'error', id: 'list-error' }, e.message));
      explain(e, kind === 'refunds' ? 'Refunds' : 'Reservations');
      return;
    }
    if (stale(g)) return;
    listRows = (kind === 'refunds' ? page.refunds : page.reservations) || [];
    const rows = listRows.slice();
    if (listAmountOrder) rows.sort((a, b) => (listAmountOrder === 'asc' ? a.amount - b.amount : b.amount - a.amount));
    const tools = h('div', { class: 'list-tools inline' }, listPager(kind, params, page.next_cursor),
      h('button', { type: 'button', id: 'list-csv', onclick: () => exportCSV(kind, listRows) }, 'Export CSV'),
      kind === 'refunds' && may('operate') ? bulkReconcile() : null);
    const table = kind === 'refunds' ? listRefundTable(params, rows) : listReservationTable(params, rows);
    box.replaceChildren(head, form, tools,
      rows.length ? table : h('p', { class: 'empty', id: 'list-empty' },
        page.next_cursor ? 'None on this page; the list goes on (Next).' : 'No ' + kind + ' match these filters.'));
    showBulkCount();
  }

  function listFilterForm(kind, params) {
    const fields = LIST_FILTERS[kind].map(([name, label, hint]) => h('label', { class: 'filter' },
      h('span', null, label), h('input', { name, value: params.get(name) || '', placeholder: hint || '', spellcheck: 'false', maxlength: '200' })));
    const form = h('form', { id: 'list-filter', class: 'filters', autocomplete: 'off' }, fields,
      h('span', { class: 'inline' }, h('button', { type: 'submit', class: 'primary', id: 'list-apply' }, 'Filter'),
        h('button', { type: 'button', onclick: () => { location.hash = listHash(kind, new URLSearchParams()); } }, 'Clear')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const p = new URLSearchParams();
      for (const input of form.querySelectorAll('input[name]')) {
        const v = input.value.trim();
        if (v) p.set(input.name, v);
      }
      if (params.get('order')) p.set('order', params.get('order'));
      const hash = listHash(kind, p);
      if (location.hash === hash) route();
      else location.hash = hash;
    });
    return form;
  }

  function listPager(kind, params, next) {
    const base = listBase(kind, params);
    const trail = listTrail.get(base) || [];
    const go = (cursor) => {
      const p = new URLSearchParams(params);
      if (cursor) p.set('cursor', cursor);
      else p.delete('cursor');
      location.hash = listHash(kind, p);
    };
    const prev = h('button', { type: 'button', id: 'list-prev', disabled: !params.get('cursor') }, '\u2190 Previous');
    prev.addEventListener('click', () => {
      const t = listTrail.get(base) || [];
      const back = t.pop() || '';
      listTrail.set(base, t);
      go(back);
    });
    const nextB = h('button', { type: 'button', id: 'list-next', disabled: !next }, 'Next \u2192');
    nextB.addEventListener('click', () => {
      listTrail.set(base, [...trail, params.get('cursor') || '']);
      go(next);
    });
    return h('span', { class: 'inline pager' }, prev, nextB);
  }

  // sortHeader is a column heading that sorts: by time through the API
  // (order, across pages), by amount on the page shown.
  function sortHeader(label, kind, params, by) {
    let mark;
    let onclick;
    if (by === 'time') {
      const asc = params.get('order') === 'asc';
      mark = asc ? ' \u25b2' : ' \u25bc';
      onclick = () => {
        const p = new URLSearchParams(params);
        p.delete('cursor');
        p.set('order', asc ? 'desc' : 'asc');
        location.hash = listHash(kind, p);
      };
    } else {
      mark = listAmountOrder === 'asc' ? ' \u25b2' : listAmountOrder === 'desc' ? ' \u25bc' : '';
      onclick = () => {
        listAmountOrder = listAmountOrder === 'desc' ? 'asc' : 'desc';
        route();
      };
    }
    return h('th', { class: 'sortable', 'data-sort': by },
      h('button', { type: 'button', class: 'link', onclick, title: by === 'time' ? 'Sort by time (every page)' : 'Sort this page by amount' }, label + mark));
  }

  function listRefundTable(params, rows) {
    const all = h('input', { type: 'checkbox', id: 'list-select-all', 'aria-label': 'Select every UNKNOWN or PROCESSING refund shown' });
    all.addEventListener('change', () => {
      for (const c of document.querySelectorAll('#list input.select')) c.checked = all.checked;
      showBulkCount();
    });
    const head = h('tr', null, h('th', null, all), sortHeader('Requested', 'refunds', params, 'time'),
      h('th', null, 'Refund'), h('th', null, 'Reservation'), h('th', null, 'Merchant'), h('th', null, 'Order'),
      sortHeader('Amount', 'refunds', params, 'amount'), h('th', null, 'State'), h('th', null, 'Reason'),
      h('th', null, 'Updated'), h('th', null, 'Actions'));
    const body = h('tbody', null, rows.map((r) => {
      const tr = h('tr', { 'data-refund-no': r.refund_no, 'data-state': r.state });
      const pick = RECONCILABLE.has(r.state)
        ? h('input', { type: 'checkbox', class: 'select', 'aria-label': 'Select ' + r.refund_no, onchange: showBulkCount })
        : null;
      if (pick) pick.refund = r;
      tr.append(h('td', null, pick), h('td', { class: 'when' }, at(r.created_at), h('div', { class: 'muted age' }, ago(r.created_at))),
        h('td', { class: 'mono' }, h('a', { href: reservationHash(r.reservation_id, r.refund_no) }, r.refund_no)),
        h('td', { class: 'mono' }, h('a', { href: reservationHash(r.reservation_id) }, r.reservation_id)),
        h('td', null, r.merchant), h('td', { class: 'mono' }, r.out_trade_no || ''),
        h('td', { class: 'num' }, yuan(r.amount)), h('td', { class: 'state-cell' }, stateBadge(r.state)),
        h('td', { class: 'reason' }, r.reason || '', r.reason_code ? h('span', { class: 'tag info' }, r.reason_code) : null),
        h('td', { class: 'when' }, at(r.updated_at)), h('td', null, actions(r, tr)));
      return tr;
    }));
    return h('div', { class: 'table-scroll' }, h('table', { id: 'list-table' }, h('thead', null, head), body));
  }

  function listReservationTable(params, rows) {
    const head = h('tr', null, sortHeader('Registered', 'reservations', params, 'time'), h('th', null, 'Reservation'),
      h('th', null, 'Merchant'), h('th', null, 'Order'), h('th', null, 'User'), sortHeader('Amount', 'reservations', params, 'amount'),
      h('th', null, 'Status'), h('th', null, 'Refunded'), h('th', null, 'In flight'), h('th', null, 'Refunds'));
    const body = h('tbody', null, rows.map((r) => h('tr', { 'data-reservation': r.id },
      h('td', { class: 'when' }, at(r.registered_at), h('div', { class: 'muted age' }, ago(r.registered_at))),
      h('td', { class: 'mono' }, h('a', { href: reservationHash(r.id) }, r.id)), h('td', null, r.merchant),
      h('td', { class: 'mono' }, r.out_trade_no), h('td', { class: 'mono' }, r.user_id),
      h('td', { class: 'num' }, yuan(r.amount, r.currency)), h('td', null, r.status),
      h('td', { class: 'num' }, yuan(r.refunded, r.currency)), h('td', { class: 'num' }, yuan(r.in_flight, r.currency)),
      h('td', null, (r.refunds || []).map((f, i) => [i ? ' ' : '', stateBadge(f.state)])))));
    return h('div', { class: 'table-scroll' }, h('table', { id: 'list-table' }, h('thead', null, head), body));
  }

  // The refunds a bulk reconcile acts on: those selected, or with none
  // selected every UNKNOWN or PROCESSING refund shown.
  function bulkTargets() {
    const boxes = [...document.querySelectorAll('#list input.select')];
    const chosen = boxes.filter((c) => c.checked);
    return (chosen.length ? chosen : boxes).map((c) => c.refund);
  }

  function showBulkCount() {
    const b = document.getElementById('list-bulk');
    if (!b) return;
    const n = bulkTargets().length;
    b.textContent = 'Reconcile ' + n + '\u2026';
    b.disabled = n === 0;
  }

  function bulkReconcile() {
    const wrap = h('span', { class: 'inline', id: 'list-bulk-box' });
    const open = h('button', { type: 'button', id: 'list-bulk', title: 'Ask WeChat Pay now about the selected (or every shown) UNKNOWN and PROCESSING refund' });
    open.addEventListener('click', () => {
      const targets = bulkTargets();
      const yes = h('button', { type: 'button', class: 'primary', id: 'list-bulk-confirm' }, 'Reconcile ' + targets.length);
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        let done = 0;
        const failed = [];
        for (const r of targets) {
          say('Reconciling ' + (done + 1) + ' of ' + targets.length + ': ' + r.refund_no + '\u2026', 'info');
          try {
            await api('POST', refundPath(r) + '/reconcile');
          } catch (e) {
            failed.push(r.refund_no + ' (' + e.message + ')');
          }
          done++;
        }
        say('Reconciled ' + (done - failed.length) + ' of ' + targets.length + (failed.length ? '; failed: ' + failed.join(', ') : '') + '.',
          failed.length ? 'error' : 'ok');
        await refreshView();
      });
      wrap.replaceChildren(h('span', { class: 'confirm-box' },
        h('span', { class: 'confirm' }, 'Reconcile ' + targets.length + ' refund' + (targets.length === 1 ? '' : 's') + ' (asks WeChat Pay about each now)?'),
        yes, h('button', { type: 'button', onclick: () => { wrap.replaceChildren(open); showBulkCount(); } }, 'Cancel')));
      yes.focus();
    });
    wrap.append(open);
    return wrap;
  }

  // csvCell quotes a value for CSV, and keeps a spreadsheet from reading
  // a cell that starts like a formula as one.
  function csvCell(v) {
    let s = v === undefined || v === null ? '' : String(v);
    if (/^[=+\-@\t\r]/.test(s)) s = "'" + s;
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  const CSV_COLUMNS = {
    refunds: ['refund_no', 'reservation_id', 'merchant', 'out_trade_no', 'state', 'amount', 'reason_code', 'reason', 'code',
      'message', 'provider_refund_id', 'attempts', 'created_at', 'updated_at'],
    reservations: ['id', 'merchant', 'user_id', 'out_trade_no', 'transaction_id', 'status', 'amount', 'currency', 'refunded',
      'in_flight', 'refundable', 'registered_at'],
  };

  // exportCSV downloads the rows shown as CSV (amounts in fen, times as
  // the API gives them, UTC).
  function exportCSV(kind, rows) {
    const cols = CSV_COLUMNS[kind];
    const lines = [cols.join(',')];
    for (const r of rows) lines.push(cols.map((c) => csvCell(r[c])).join(','));
    const blob = new Blob([lines.join('\r\n') + '\r\n'], { type: 'text/csv;charset=utf-8' });
    const url = URL.createObjectURL(blob);
    const a = h('a', { href: url, download: kind + '.csv', hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    say('Exported ' + rows.length + ' ' + kind + ' as ' + kind + '.csv.', 'ok');
  }

  // --- time zone and auto-refresh ------------------------------------------

  // drawnAt is when the current view was last drawn; routing is set while
  // it is being drawn.
  let drawnAt = 0;
  let routing = false;

  function showUpdated() {
    const el = $('updated');
    if (!el) return;
    el.textContent = drawnAt ? 'updated ' + Math.floor((Date.now() - drawnAt) / 1000) + ' s ago' : '';
  }

  const autoRefresh = () => sessionStorage.getItem(AUTO_KEY) !== 'off';

  // busy says the operator is in the middle of something a redraw would
  // throw away: a confirmation open, a reason being typed, refunds
  // selected in a list.
  // Without a token there is nothing to refresh, and the 401 hint would
  // take the focus from the token being typed.
  const busy = () => routing || !token() ||
    !!document.querySelector('.confirm-box, .actions form, input:focus:not([type="checkbox"]), #list input.select:checked');

  function tick() {
    showUpdated();
    if (autoRefresh() && !document.hidden && !busy() && Date.now() - drawnAt >= AUTO_EVERY_MS) refreshView();
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
    $('zone').value = beijing() ? 'beijing' : 'utc';
    $('zone').addEventListener('change', (ev) => {
      setZone(ev.target.value);
      refreshView();
    });
    $('auto-refresh').checked = autoRefresh();
    $('auto-refresh').addEventListener('change', (ev) => {
      if (ev.target.checked) sessionStorage.removeItem(AUTO_KEY);
      else sessionStorage.setItem(AUTO_KEY, 'off');
    });
    setInterval(tick, 1000);
    window.addEventListener('hashchange', () => route());
    route();
  });
})();
