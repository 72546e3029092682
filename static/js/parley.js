// Parley's page behaviour: websocket sync, idempotent appends, auto-scroll, composer keys.
(function () {
  "use strict";

  // Let htmx swap 422 responses: the composer comes back with the error and the typed text.
  htmx.config.responseHandling = [
    { code: "204", swap: false },
    { code: "[23]..", swap: true },
    { code: "422", swap: true },
    { code: "[45]..", swap: false, error: true },
  ];

  function transcript() { return document.getElementById("transcript"); }

  function atBottom() {
    const el = document.scrollingElement;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  }
  let stickToBottom = true;
  function followIfSticking() {
    if (stickToBottom) window.scrollTo({ top: document.scrollingElement.scrollHeight });
  }
  window.addEventListener("scroll", function () { stickToBottom = atBottom(); }, { passive: true });

  // After (re)connecting, tell the server what this tab shows so it can fill the gap exactly.
  document.addEventListener("htmx:wsOpen", function (evt) {
    const log = transcript();
    if (!log) return;
    let afterSeq = 0;
    const pending = [];
    log.querySelectorAll("article.msg").forEach(function (el) {
      afterSeq = Math.max(afterSeq, parseInt(el.dataset.seq || "0", 10));
      if (el.dataset.status === "queued" || el.dataset.status === "streaming") {
        pending.push(el.id.replace(/^msg-/, ""));
      }
    });
    evt.detail.socketWrapper.send(JSON.stringify({ type: "sync", after_seq: afterSeq, pending: pending }));
  });

  // The HTTP response and the websocket both announce new bubbles; keep the first copy.
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    const target = evt.detail.target;
    if (!target || target.id !== "transcript") return;
    evt.detail.fragment.querySelectorAll("article.msg[id]").forEach(function (el) {
      if (document.getElementById(el.id)) el.remove();
    });
  });

  document.addEventListener("htmx:wsBeforeMessage", function () { stickToBottom = atBottom(); });
  document.addEventListener("htmx:wsAfterMessage", followIfSticking);
  document.addEventListener("htmx:afterSettle", followIfSticking);

  // Composer: Enter sends, Shift+Enter breaks the line, the box grows with its text.
  function grow(area) {
    area.style.height = "auto";
    area.style.height = Math.min(area.scrollHeight, window.innerHeight * 0.4) + "px";
  }
  document.addEventListener("input", function (evt) {
    if (evt.target.id === "composer-text") grow(evt.target);
  });
  document.addEventListener("keydown", function (evt) {
    const area = evt.target;
    if (area.id !== "composer-text") return;
    if (evt.key === "Enter" && !evt.shiftKey && !evt.isComposing) {
      evt.preventDefault();
      if (area.value.trim()) htmx.trigger(area.form, "submit");
    }
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.detail.target && evt.detail.target.id === "composer") {
      const area = document.getElementById("composer-text");
      if (area) { grow(area); area.focus(); }
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    stickToBottom = true;
    followIfSticking();
    const area = document.getElementById("composer-text");
    if (area) { grow(area); area.focus(); }
  });
})();
