// Live refresh for the RES console. Every page reads fully without it; with it, the page
// fetches itself every few seconds (the body's data-refresh) and swaps only the regions
// marked data-live, so forms, focus and scroll position stay as they are.
//
// A page never looks live when it is not: when a refresh fails it says since when it has
// not been updated and keeps trying, and clears that once the service answers again; when
// the session has ended it goes to sign-in. An error page the service could not serve (a
// 503, the body's data-recover) reloads itself once the service answers.
(function () {
  "use strict";
  var body = document.body;
  var seconds = Number(body.getAttribute("data-refresh") || 0);
  var recover = Number(body.getAttribute("data-recover") || 0);
  if ((!seconds && !recover) || !window.fetch || !window.DOMParser) {
    return;
  }
  var updated = new Date();
  function later() {
    window.setTimeout(refresh, (seconds || recover) * 1000);
  }
  function clock(date) {
    return date.toTimeString().slice(0, 8);
  }
  function signIn() {
    var here = window.location.pathname + window.location.search;
    window.location.assign("/console/sign-in?next=" + encodeURIComponent(here));
  }
  function stale(why) {
    var note = document.getElementById("stale");
    if (!note) {
      note = document.createElement("p");
      note.id = "stale";
      note.className = "notice bad";
      note.setAttribute("role", "status");
      var main = document.getElementById("main") || body;
      main.insertBefore(note, main.firstChild);
    }
    note.textContent =
      "Not updated since " + clock(updated) + ": " + why + ". Trying again every " +
      seconds + " s.";
    document.documentElement.setAttribute("data-stale", "true");
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
    updated = new Date();
    var note = document.getElementById("stale");
    if (note) {
      note.parentNode.removeChild(note);
    }
    document.documentElement.removeAttribute("data-stale");
    document.documentElement.setAttribute("data-refreshed", String(updated.getTime()));
  }
  function refresh() {
    if (document.hidden) {
      later();
      return;
    }
    window
      .fetch(window.location.href, { credentials: "same-origin", redirect: "manual" })
      .then(function (response) {
        // Only an ended session redirects a page to itself (to sign-in).
        if (response.type === "opaqueredirect" || response.status === 401) {
          signIn();
          return null;
        }
        if (!response.ok) {
          throw new Error("the service answered " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        if (recover) {
          window.location.reload();
          return;
        }
        swap(html);
      })
      .catch(function (error) {
        if (recover) {
          return;
        }
        stale(error instanceof TypeError ? "the service cannot be reached" : error.message);
      })
      .then(later);
  }
  later();
})();
