// The source page while a sync runs: follows the source's Server-Sent Events and redraws the
// sync's line (state, progress) and counts in place. When the sync ends the page is loaded once
// more only if it failed items to list. Without scripts the page reloads itself (<noscript>).
(function () {
  "use strict";

  var FINISHED = ["ready", "failed", "cancelled"];
  var line = document.querySelector('[data-field="sync-state"][data-events]');
  if (!line || !window.EventSource) return;
  var badge = line.querySelector('[data-field="sync-badge"]');
  var progress = line.querySelector('[data-field="sync-progress"]');
  var stream = new EventSource(line.dataset.events);

  function draw(sync) {
    badge.textContent = sync.state_label;
    badge.className = "badge state-" + sync.state;
    line.dataset.state = sync.state;
    var running = FINISHED.indexOf(sync.status) < 0;
    var text = running ? line.dataset.done.replace("%(progress)s", sync.progress) : "";
    if (running && sync.total) text += " (" + (sync.processed || 0) + "/" + sync.total + ")";
    progress.textContent = text;
    Object.keys(sync.counts).forEach(function (key) {
      var cell = document.querySelector('[data-count="' + key + '"]');
      if (cell) cell.textContent = sync.counts[key];
    });
    if (running) return;
    stream.close();
    // Failed items are listed by the page: load it once to show them. (Drawn here they would be
    // in English: the page translates each failure's message, the stream carries it as stored.)
    if (sync.failures.length && !document.querySelector('[data-field="failures"]')) window.location.reload();
  }

  stream.addEventListener("sync", function (event) {
    draw(JSON.parse(event.data));
  });
})();
