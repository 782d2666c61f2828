// Live updates of the status page from the event stream: an availability
// event rewrites the AoR's status word at once; every event of an AoR on
// the page re-fetches its fragment (a row, or the AoR page's body) and
// the summary strip, at most every half second; the summary also every
// 10 s, as its probe rates and sink tiles change without an event, and
// so does, in cluster mode, the AoR page's body: the other vantages'
// votes change without an event on this node.
// Without JavaScript the page refreshes itself every minute.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource || !window.fetch) return;
  var pending = new Set(), summary = false, timer = 0;

  function part(aor) {
    return document.querySelector('[data-aor="' + CSS.escape(aor) + '"]');
  }
  function show(state, text) {
    live.className = "live " + state;
    live.textContent = text;
  }
  function setAvailable(el, up) {
    el.classList.toggle("up", up);
    el.classList.toggle("down", !up);
    var word = el.querySelector(".status");
    if (word) word.textContent = up ? "available" : "unavailable";
  }
  function replace(el, html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    if (t.content.firstElementChild && el.isConnected) el.replaceWith(t.content.firstElementChild);
  }
  function refetch(el, url) {
    fetch(url).then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) replace(el, html); })
      .catch(function () {});
  }
  function flush() {
    timer = 0;
    pending.forEach(function (aor) {
      var el = part(aor);
      if (el) refetch(el, "/aors/" + encodeURIComponent(aor) + "?fragment=" + el.dataset.fragment);
    });
    pending.clear();
    if (summary) {
      summary = false;
      var s = document.querySelector('[data-fragment="summary"]');
      if (s) refetch(s, "/?fragment=summary");
    }
  }
  function queue(aor) {
    if (aor && part(aor)) pending.add(aor);
    summary = true;
    if (!timer) timer = setTimeout(flush, 500);
  }

  var es = new EventSource("/api/v1/events");
  es.onopen = function () { show("on", "live"); };
  es.onerror = function () { show("off", "reconnecting"); };
  es.addEventListener("availability", function (e) {
    var d = JSON.parse(e.data), el = part(d.aor);
    if (el) setAvailable(el, d.available);
    queue(d.aor);
  });
  ["status", "failure", "recovery", "cleared", "draining"].forEach(function (kind) {
    es.addEventListener(kind, function (e) { queue(JSON.parse(e.data).aor); });
  });
  setInterval(function () {
    if (document.querySelector("[data-cluster]")) {
      document.querySelectorAll('[data-fragment="detail"]').forEach(function (el) { pending.add(el.dataset.aor); });
    }
    queue("");
  }, 10000);
  es.addEventListener("gap", function () {
    document.querySelectorAll("[data-aor]").forEach(function (el) { pending.add(el.dataset.aor); });
    queue("");
  });
})();
