// Shared by every page: times in the reader's own time zone (named: "long" time style) and language.
// The server writes <time datetime="..." data-local>UTC text</time>; without JavaScript the UTC
// text stays, which is still the truth.
(function () {
  "use strict";

  var lang = document.documentElement.lang || undefined;
  var formatter;
  try {
    formatter = new Intl.DateTimeFormat(lang, { dateStyle: "medium", timeStyle: "long" });
  } catch (error) {
    formatter = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "long" });
  }

  function formatTime(element) {
    var iso = element.getAttribute("datetime");
    var moment = new Date(iso);
    if (!isNaN(moment.getTime())) {
      element.textContent = formatter.format(moment);
      element.title = iso;
    }
  }

  function timeElement(iso) {
    var element = document.createElement("time");
    element.setAttribute("datetime", iso);
    element.setAttribute("data-local", "");
    element.textContent = iso;
    formatTime(element);
    return element;
  }

  document.querySelectorAll("time[data-local]").forEach(formatTime);
  window.ingestPages = { formatTime: formatTime, timeElement: timeElement };
})();
