// The document page, live: follows the job's Server-Sent Events and redraws the status card.
//
// The status endpoint is the truth; the stream only tells us early. So:
// - every answer (stream event, poll, action) goes through render(), which ignores anything
//   older than what the page shows (by the job's updated_at): replayed or late answers can
//   never move the page backwards;
// - when the stream drops, the page polls the status endpoint every few seconds until the
//   stream is back. The browser reconnects by itself (sending Last-Event-ID); if it gives up,
//   we open a new EventSource after a back-off. Either way, once the stream is open again we
//   FIRST re-read the status endpoint and only then apply the stream's events;
// - a healthy stream is still checked against the endpoint every 30 s, in case it went silent;
// - once the job is finished (ready, failed, cancelled) everything stops.
(function () {
  "use strict";

  var POLL_MS = 3000;
  var CHECK_MS = 30000;
  var RECONNECT_MAX_MS = 30000;
  // No unit finished for this long while running: show the worker's heartbeat (re-read this
  // often), so a slow page does not look frozen.
  var QUIET_MS = 10000;
  var FINISHED = ["ready", "failed", "cancelled"];

  var card = document.getElementById("job");
  var words = JSON.parse(document.getElementById("status-words").textContent);
  var shown = JSON.parse(document.getElementById("job-status").textContent);

  var source = null;
  var dropped = false;
  var syncing = null; // the status re-read after a reconnect; stream events wait for it
  var pollTimer = null;
  var reconnectTimer = null;
  var reconnectDelay = 2000;
  var lastRead = Date.now(); // when the page last read the status endpoint
  var heartbeatTimer = null;

  // --- helpers ---------------------------------------------------------------------------

  function part(name) {
    return document.querySelector('[data-field="' + name + '"]');
  }

  function format(template, values) {
    return template.replace(/%\((\w+)\)s/g, function (whole, key) {
      return key in values ? String(values[key]) : whole;
    });
  }

  // Fill an element with a translated sentence whose placeholders may be elements.
  function fill(element, template, values) {
    element.textContent = "";
    template.split(/(%\(\w+\)s)/).forEach(function (piece) {
      var key = /^%\((\w+)\)s$/.exec(piece);
      var value = key ? values[key[1]] : piece;
      element.append(value instanceof Node ? value : document.createTextNode(String(value)));
    });
  }

  function show(element, visible) {
    if (element) element.hidden = !visible;
  }

  function isFinished(status) {
    return FINISHED.indexOf(status.status) >= 0;
  }

  // updated_at as microseconds: ISO strings from Python may omit or carry 6 fraction digits.
  function stamp(iso) {
    var fraction = /\.(\d+)/.exec(iso);
    var micros = fraction ? parseInt((fraction[1] + "000000").slice(0, 6), 10) : 0;
    return Date.parse(iso.replace(/\.\d+/, "")) * 1000 + micros;
  }

  function word(table, code, fallback) {
    return table[code] || fallback || code;
  }

  // --- drawing ---------------------------------------------------------------------------

  function render(status) {
    if (stamp(status.updated_at) < stamp(shown.updated_at)) return; // older than the page
    var before = shown;
    shown = status;
    card.dataset.status = status.status;

    var state = part("state");
    state.textContent = word(words.states, status.state);
    state.className = "badge state-" + status.state;

    var stageLine = part("stage-line");
    stageLine.textContent = format(words.stageLine, {
      index: status.stage_index,
      count: status.stage_count,
      label: word(words.stages, status.stage, status.stage_label),
    });
    show(stageLine, status.status !== "ready");

    drawStepper(status);
    drawProgress(status);
    part("updated").replaceChildren(window.ingestPages.timeElement(status.updated_at));
    part("attempt").textContent = status.attempt;
    show(part("attempt-row"), status.attempt > 0);
    drawError(status);
    drawActions(status);
    drawSearchable(status);
    drawStoredFile(status);
    drawVersionRow(status);
    drawHeartbeat();

    if (before.state !== status.state) {
      part("announce").textContent = format(words.announce, { state: word(words.states, status.state) });
    }
    if (isFinished(status)) stop();
  }

  function drawStepper(status) {
    status.stages.forEach(function (stage) {
      var step = card.querySelector('.step[data-stage="' + stage.name + '"]');
      if (!step) return;
      step.dataset.state = stage.state;
      step.querySelector(".step-state").textContent = word(words.stageStates, stage.state);
      if (stage.state === "running") step.setAttribute("aria-current", "step");
      else step.removeAttribute("aria-current");
    });
  }

  function drawProgress(status) {
    var honest = status.progress !== null && status.progress !== undefined;
    show(part("progress"), honest);
    if (!honest) return;
    var percent = Math.floor(status.progress); // 99.6 must not read as 100 before ready
    var bar = card.querySelector("progress");
    bar.value = percent;
    bar.textContent = percent + "%";
    part("percent").textContent = percent + "%";
    var counted = status.status !== "ready" && status.processed !== null && status.total;
    part("counts").textContent = counted
      ? format(word(words.counts, status.unit || "", words.counts[""]), {
          processed: status.processed,
          total: status.total,
        })
      : "";
  }

  function drawError(status) {
    var error = status.error;
    show(part("error"), !!error);
    var reupload = !!error && error.action === "reupload";
    show(part("reupload"), reupload);
    show(part("new-version"), !reupload);
    if (!error) return;
    part("error-message").textContent = word(words.causes, error.code, error.message);
    part("error-action").textContent = word(words.actions, error.action);
  }

  function drawActions(status) {
    show(card.querySelector('form[data-action="cancel"]'), status.can_cancel);
    show(card.querySelector('form[data-action="retry"]'), status.can_retry);
    show(card.querySelector('form[data-action="process_again"]'), !!status.can_process_again);
    if (!status.can_cancel) askToCancel(false);
    show(part("stopping"), status.cancel_requested);
  }

  function drawHeartbeat() {
    var element = part("heartbeat");
    var now = Date.now();
    var quiet =
      shown.status === "running" && !!shown.heartbeat_at && now - stamp(shown.updated_at) / 1000 >= QUIET_MS;
    show(element, quiet);
    if (!quiet) return;
    var seconds = Math.max(0, Math.round((now - stamp(shown.heartbeat_at) / 1000) / 1000));
    element.textContent = format(words.stillWorking, { seconds: seconds });
    if (now - lastRead >= QUIET_MS) refresh(); // a fresh heartbeat (it raises no event)
  }

  function drawSearchable(status) {
    if (status.status !== "ready" || !status.published_at) return;
    fill(part("searchable-since"), words.searchableSince, {
      time: window.ingestPages.timeElement(status.published_at),
      version: status.version,
    });
    show(part("searchable"), true);
  }

  // Until when the uploaded file stays for retries (once the job ended), or that it is gone.
  function drawStoredFile(status) {
    var freed = part("bytes-freed");
    var kept = part("bytes-kept");
    if (status.bytes_freed_at) {
      fill(freed, words.bytesFreed, { when: window.ingestPages.timeElement(status.bytes_freed_at) });
    }
    show(freed, !!status.bytes_freed_at);
    var keeping = !status.bytes_freed_at && !!status.bytes_kept_until;
    if (keeping) {
      fill(kept, words.bytesKept, { when: window.ingestPages.timeElement(status.bytes_kept_until) });
    }
    show(kept, keeping);
  }

  function drawVersionRow(status) {
    var row = document.querySelector('tr[data-job="' + status.job_id + '"]');
    if (!row) return;
    row.querySelector('[data-cell="state"]').textContent = word(words.states, status.state);
    var role = { ready: "published", failed: "failed", cancelled: "cancelled" }[status.status] || "processing";
    if (role === "published") {
      // Publishing a version supersedes the one published before it.
      document.querySelectorAll('tr[data-job] [data-role="published"]').forEach(function (badge) {
        setRole(badge, "superseded");
      });
    }
    setRole(row.querySelector("[data-role]"), role);
  }

  function setRole(badge, role) {
    badge.dataset.role = role;
    badge.className = "role role-" + role;
    badge.textContent = word(words.roles, role);
  }

  function connection(text) {
    var element = part("connection");
    element.textContent = text || "";
    element.dataset.state = text === words.live ? "live" : "down";
    show(element, !!text);
  }

  // --- talking to the server -------------------------------------------------------------

  function refresh() {
    lastRead = Date.now();
    return fetch(shown.status_url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.ok ? response.json().then(render) : null;
      })
      .catch(function () {
        return null; // still down: the next poll tries again
      });
  }

  function schedulePoll() {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(function () {
      refresh().then(function () {
        if (!isFinished(shown)) schedulePoll();
      });
    }, dropped ? POLL_MS : CHECK_MS);
  }

  function onEvent(event) {
    var status = JSON.parse(event.data);
    if (syncing) syncing.then(function () { render(status); });
    else render(status);
  }

  function onOpen() {
    reconnectDelay = 2000;
    connection(words.live);
    if (!dropped) return;
    dropped = false;
    // Reconnected: what the stream missed may not be replayed (a new EventSource carries no
    // Last-Event-ID), so read the truth first.
    syncing = refresh().then(function () {
      syncing = null;
    });
    schedulePoll();
  }

  function onError() {
    if (isFinished(shown)) return stop();
    if (!dropped) {
      dropped = true;
      connection(words.reconnecting);
      refresh();
      schedulePoll();
    }
    if (source && source.readyState === EventSource.CLOSED) {
      // The browser gave up (an HTTP error, say): open a new stream ourselves, backing off.
      source = null;
      clearTimeout(reconnectTimer);
      reconnectTimer = setTimeout(connect, reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, RECONNECT_MAX_MS);
    }
  }

  function connect() {
    if (source || isFinished(shown) || !window.EventSource) return;
    source = new EventSource(shown.events_url);
    source.addEventListener("open", onOpen);
    source.addEventListener("status", onEvent);
    source.addEventListener("progress", onEvent);
    source.addEventListener("error", onError);
  }

  function stop() {
    if (source) source.close();
    source = null;
    dropped = false;
    clearTimeout(pollTimer);
    clearTimeout(reconnectTimer);
    clearInterval(heartbeatTimer);
    heartbeatTimer = null;
    show(part("heartbeat"), false);
    connection("");
  }

  // Cancel asks first, in the card: its first button shows the question, whose "yes" posts.
  // (Without JavaScript the first button posts and the server shows a confirmation page.)
  function askToCancel(asking) {
    var form = card.querySelector('form[data-action="cancel"]');
    show(form.querySelector('[data-step="ask"]'), !asking);
    show(form.querySelector('[data-field="confirm-cancel"]'), asking);
    if (asking) form.querySelector('[data-step="confirm"]').focus();
  }

  card.querySelector('[data-step="keep"]').addEventListener("click", function () {
    askToCancel(false);
    card.querySelector('[data-step="ask"]').focus();
  });

  // Cancel and retry through the API, so the answer redraws the card at once; the plain forms
  // (and their redirect) remain for browsers without JavaScript. "Process again" stays a plain
  // form: it makes a new version, whose page the redirect shows.
  card.querySelectorAll("form[data-action][data-api]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var step = event.submitter && event.submitter.dataset.step;
      if (step === "ask") return askToCancel(true);
      var button = event.submitter || form.querySelector("button");
      var token = form.querySelector('[name="csrfmiddlewaretoken"]').value;
      var refused = part("action-error");
      button.disabled = true;
      show(refused, false);
      fetch(form.dataset.api, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": token, Accept: "application/json" },
      })
        .then(function (response) {
          if (!response.ok) throw new Error("refused");
          return response.json();
        })
        .then(function (status) {
          render(status);
          connect(); // a retried job is active again
          schedulePoll();
          if (!isFinished(shown) && !heartbeatTimer) heartbeatTimer = setInterval(drawHeartbeat, 1000);
        })
        .catch(function () {
          refused.textContent = words.actionRefused;
          show(refused, true);
          refresh();
        })
        .finally(function () {
          button.disabled = false;
          if (step === "confirm") askToCancel(false);
        });
    });
  });

  if (!window.EventSource) dropped = true; // no stream at all: poll at the quick pace
  connect();
  if (!isFinished(shown)) {
    schedulePoll();
    heartbeatTimer = setInterval(drawHeartbeat, 1000);
  }
})();
