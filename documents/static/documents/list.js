// The documents list, live: while any row is still being processed, the page re-reads itself
// every few seconds and swaps in the server's rendering of the list (the same template, so
// words, links and escaping stay the server's). The upload form is left alone. Polling pauses
// while the tab is hidden and stops once every row is finished; a failed read keeps what the
// page shows and tries again later.
(function () {
  "use strict";

  var POLL_MS = 4000;
  var FINISHED = ["ready", "failed", "cancelled"];
  var ID = "documents-list";

  var section = document.getElementById(ID);
  if (!section) return;

  function busy() {
    return Array.prototype.some.call(section.querySelectorAll("tr[data-status]"), function (row) {
      return FINISHED.indexOf(row.dataset.status) < 0;
    });
  }

  function schedule() {
    if (busy()) window.setTimeout(refresh, POLL_MS);
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(ID);
    if (!fresh) return;
    section.replaceChildren.apply(section, Array.prototype.slice.call(fresh.childNodes));
    if (window.ingestPages) {
      section.querySelectorAll("time[data-local]").forEach(window.ingestPages.formatTime);
    }
  }

  function refresh() {
    if (document.hidden) {
      document.addEventListener("visibilitychange", refresh, { once: true });
      return;
    }
    fetch(window.location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("status " + response.status);
        return response.text();
      })
      .then(swap)
      .catch(function () {
        // Keep the rows as they are; the next read may succeed.
      })
      .then(schedule);
  }

  schedule();
})();
