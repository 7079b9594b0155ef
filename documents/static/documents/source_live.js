// The source page while a sync runs: follows the source's Server-Sent Events and redraws the
// sync's line (state, progress, the sync's own failure), its counts and its failed items in place;
// the stream says every message in the page's language, so the page is never loaded again.
// Without scripts the page reloads itself (<noscript>).
(function () {
  "use strict";

  var FINISHED = ["ready", "failed", "cancelled"];
  var line = document.querySelector('[data-field="sync-state"][data-events]');
  if (!line || !window.EventSource) return;
  var badge = line.querySelector('[data-field="sync-badge"]');
  var progress = line.querySelector('[data-field="sync-progress"]');
  var error = line.querySelector('[data-field="sync-error"]');
  var failuresBox = document.querySelector('[data-field="failures-box"]');
  var stream = new EventSource(line.dataset.events);

  function drawFailures(failures) {
    if (!failuresBox) return;
    var body = failuresBox.querySelector("tbody");
    var rows = failures.map(function (failure) {
      var row = document.createElement("tr");
      var key = document.createElement("th");
      key.scope = "row";
      key.textContent = failure.key;
      var cause = document.createElement("td");
      cause.textContent = failure.message + " (" + failure.code + ")";
      row.appendChild(key);
      row.appendChild(cause);
      return row;
    });
    body.replaceChildren.apply(body, rows);
    failuresBox.hidden = failures.length === 0;
  }

  function draw(sync) {
    badge.textContent = sync.state_label;
    badge.className = "badge state-" + sync.state;
    line.dataset.state = sync.state;
    var running = FINISHED.indexOf(sync.status) < 0;
    var text = running ? line.dataset.done.replace("%(progress)s", sync.progress) : "";
    if (running && sync.total) text += " (" + (sync.processed || 0) + "/" + sync.total + ")";
    progress.textContent = text;
    if (error) error.textContent = sync.error ? "\u2014 " + sync.error.message : "";
    Object.keys(sync.counts).forEach(function (key) {
      var cell = document.querySelector('[data-count="' + key + '"]');
      if (cell) cell.textContent = sync.counts[key];
    });
    drawFailures(sync.failures);
    if (!running) stream.close();
  }

  stream.addEventListener("sync", function (event) {
    draw(JSON.parse(event.data));
  });
})();
