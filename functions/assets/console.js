// Live refresh for the RES console. Every page reads fully without it; with it, the page
// fetches itself every few seconds (the body's data-refresh) and swaps only the regions
// marked data-live, so forms, focus and scroll position stay as they are.
(function () {
  "use strict";
  var seconds = Number(document.body.getAttribute("data-refresh") || 0);
  if (!seconds || !window.fetch || !window.DOMParser) {
    return;
  }
  function later() {
    window.setTimeout(refresh, seconds * 1000);
  }
  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var regions = document.querySelectorAll("[data-live]");
    for (var i = 0; i < regions.length; i++) {
      var region = regions[i];
      // Leave alone what the reader is in: a focused control, an opened <details>.
      if (region.contains(document.activeElement) || region.querySelector("details[open]")) {
        continue;
      }
      var next = fresh.getElementById(region.id);
      if (next && next.innerHTML !== region.innerHTML) {
        region.innerHTML = next.innerHTML;
      }
    }
    document.documentElement.setAttribute("data-refreshed", String(Date.now()));
  }
  function refresh() {
    if (document.hidden) {
      later();
      return;
    }
    window
      .fetch(window.location.href, { credentials: "same-origin", redirect: "manual" })
      .then(function (response) {
        // A signed-out session redirects: keep the page as it is rather than show sign-in.
        if (!response.ok) {
          throw new Error("refresh answered " + response.status);
        }
        return response.text();
      })
      .then(swap)
      .catch(function () {})
      .then(later);
  }
  later();
})();
