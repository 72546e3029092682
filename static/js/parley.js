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

  // A request that failed (a 4xx the page does not swap, a 503 while Redis is away): say so
  // in words, with the server's own message when it sent plain text.
  document.addEventListener("htmx:responseError", function (evt) {
    const box = document.getElementById("request-error");
    if (!box) return;
    const xhr = evt.detail.xhr;
    const plain = (xhr.getResponseHeader("Content-Type") || "").startsWith("text/plain");
    box.textContent = plain && xhr.responseText ? xhr.responseText
      : "That did not work (" + xhr.status + "). Nothing was lost; try again.";
    box.hidden = false;
  });
  document.addEventListener("htmx:beforeRequest", function () {
    const box = document.getElementById("request-error");
    if (box) box.hidden = true;
  });

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

  // The server asks for a fresh connection (Redis restarted and the tab's groups went with it):
  // reconnect, and the sync on open catches up exactly. htmx itself retries only on errors.
  const CLOSE_RECONNECT = 4012;
  document.addEventListener("htmx:wsClose", function (evt) {
    if (evt.detail.event.code !== CLOSE_RECONNECT) return;
    setTimeout(evt.detail.socketWrapper.reconnect, 250 + Math.random() * 750);
  });

  // The HTTP response and the websocket both announce new bubbles; keep the first copy.
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    const target = evt.detail.target;
    if (!target || target.id !== "transcript") return;
    evt.detail.fragment.querySelectorAll("article.msg[id]").forEach(function (el) {
      if (document.getElementById(el.id)) el.remove();
    });
  });

  // Earlier messages arrive above what the reader is looking at: keep that message where it
  // was on screen (browsers do not anchor a page scrolled to its very top).
  let readingAnchor = null;
  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (evt.detail.elt.id !== "earlier") return;
    const first = document.querySelector("article.msg");
    readingAnchor = first && { el: first, top: first.getBoundingClientRect().top };
  });
  // On the transcript's own swap event: the marker itself may be gone (the first message has
  // arrived), and events on a removed element never reach the document.
  document.addEventListener("htmx:oobAfterSwap", function () {
    if (!readingAnchor) return;
    window.scrollBy(0, readingAnchor.el.getBoundingClientRect().top - readingAnchor.top);
    const done = readingAnchor;
    setTimeout(function () { if (readingAnchor === done) readingAnchor = null; }, 0);
  });

  // Another tab made a thread: the pushed tree replaces ours and this page marks its own
  // thread. While a rename is open in the tree, the new tree waits until the rename closes.
  let pendingTree = null;
  function markCurrentThread(tree) {
    const chat = document.getElementById("chat");
    if (!chat) return;
    const current = tree.querySelector('.thread-item[data-thread="' + chat.dataset.thread + '"] > a');
    if (current) current.setAttribute("aria-current", "page");
  }
  function applyPendingTree() {
    const tree = document.getElementById("thread-tree");
    if (!pendingTree || !tree) return;
    const fresh = pendingTree;
    pendingTree = null;
    // Names pushed since the tree was rendered have already reached the old one.
    tree.querySelectorAll(".thread-label[id]").forEach(function (label) {
      const twin = fresh.querySelector("#" + CSS.escape(label.id));
      if (twin) twin.textContent = label.textContent;
    });
    tree.replaceWith(fresh);
    htmx.process(fresh);
    markCurrentThread(fresh);
  }
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    const target = evt.detail.target;
    if (!target || target.id !== "thread-tree") return;
    if (!target.querySelector(".rename-form:not([hidden])")) return;
    const incoming = evt.detail.fragment.querySelector("#thread-tree") || evt.detail.fragment.firstElementChild;
    if (incoming) {
      pendingTree = incoming.cloneNode(true);
      pendingTree.removeAttribute("hx-swap-oob");
    }
    evt.detail.shouldSwap = false;
  });
  document.addEventListener("htmx:oobAfterSwap", function (evt) {
    const tree = document.getElementById("thread-tree");
    if (tree && tree.contains(evt.target)) markCurrentThread(tree);
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
    if (area.id === "composer-text" && mentionKeys(evt, area)) return;
    if (area.id === "composer-text" && evt.key === "Enter" && !evt.shiftKey && !evt.isComposing) {
      evt.preventDefault();
      if (area.value.trim()) submitComposer(area.form);
      return;
    }
    if (evt.key === "Escape" && !evt.defaultPrevented) escapePressed(evt);
  });
  // Sending empties the box at once, so what is typed next is the next message: the server's
  // answer replaces the composer, and whatever was typed meanwhile moves into the new one (on
  // an error, after the returned text). A failed request puts the sent text back.
  function newToken() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 15) | 64; b[8] = (b[8] & 63) | 128;
    const h = Array.prototype.map.call(b, function (x) { return (x + 256).toString(16).slice(1); }).join("");
    return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
  }
  let composerSent = null, composerTyped = null, sendAfterSwap = false;
  // One send at a time: a message sent while the previous one is on its way goes as soon as
  // the server has answered that one (htmx would drop it).
  function submitComposer(form) {
    if (composerSent !== null) { sendAfterSwap = true; return; }
    htmx.trigger(form, "submit");
  }
  document.addEventListener("submit", function (evt) {
    if (evt.target.id !== "composer" || composerSent === null) return;
    evt.preventDefault();
    evt.stopImmediatePropagation();
    sendAfterSwap = true;
  }, true);
  document.addEventListener("htmx:beforeRequest", function (evt) {
    const form = evt.detail.elt;
    if (!form || form.id !== "composer") return;
    const area = document.getElementById("composer-text");
    if (!area) return;
    composerSent = area.value;  // the request already holds it
    area.value = "";
    grow(area);
    const token = form.querySelector("input[name=client_token]");
    if (token) token.value = newToken();  // a next message sent before the answer is its own
  });
  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (!evt.detail.target || evt.detail.target.id !== "composer") return;
    const area = document.getElementById("composer-text");
    composerTyped = area ? area.value : "";
  });
  function restoreSent(evt) {
    if (!evt.detail.elt || evt.detail.elt.id !== "composer" || composerSent === null) return;
    sendAfterSwap = false;  // what waited stays in the box, after the text put back
    const area = document.getElementById("composer-text");
    if (area) {
      area.value = composerSent + (area.value ? "\n" + area.value : "");
      grow(area);
    }
    composerSent = null;
  }
  document.addEventListener("htmx:responseError", restoreSent);
  document.addEventListener("htmx:sendError", restoreSent);
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.detail.target && evt.detail.target.id === "composer") {
      const area = document.getElementById("composer-text");
      if (area) {
        const typed = composerTyped || "";
        if (evt.detail.xhr && evt.detail.xhr.status === 422) {
          area.value = area.value + (typed ? "\n" + typed : "");  // the refused text, kept
        } else {
          area.value = typed;
        }
        area.setSelectionRange(area.value.length, area.value.length);
        grow(area);
        area.focus();
      }
      composerSent = composerTyped = null;
      const refused = evt.detail.xhr && evt.detail.xhr.status === 422;
      if (sendAfterSwap && area && !refused && area.value.trim()) {
        const form = area.form;
        // Once htmx has settled the new form; a real submit event, as a click on Send makes.
        setTimeout(function () { if (form.isConnected) form.requestSubmit(); }, 50);
      }
      sendAfterSwap = false;
    }
  });
  // ---- Esc: close what is open, otherwise stop every reply of the thread. ----
  function escapePressed(evt) {
    const target = evt.target;
    const rename = target.closest && target.closest(".rename-form");
    if (rename) { closeRename(rename, true); evt.preventDefault(); return; }
    const edit = target.closest && target.closest(".msg-edit");
    if (edit) { edit.hidden = true; evt.preventDefault(); return; }
    if (document.querySelector("dialog[open]")) return; // the dialog closes itself
    const stop = document.getElementById("stop-button");
    if (stop) { evt.preventDefault(); stop.click(); }
  }

  // ---- Role picker chips and @ autocomplete. ----
  function insertAtCaret(area, text) {
    const start = area.selectionStart, end = area.selectionEnd;
    const before = area.value.slice(0, start);
    const spacer = before && !/\s$/.test(before) ? " " : "";
    area.value = before + spacer + text + area.value.slice(end);
    const caret = (before + spacer + text).length;
    area.setSelectionRange(caret, caret);
    grow(area);
    area.focus();
  }
  document.addEventListener("click", function (evt) {
    const chip = evt.target.closest(".role-picker .chip[data-handle]");
    if (!chip) return;
    const area = document.getElementById("composer-text");
    if (area) insertAtCaret(area, "@" + chip.dataset.handle + " ");
  });

  function mentionCandidates() {
    const picker = document.getElementById("role-picker");
    try { return JSON.parse(picker.dataset.mentions); } catch (e) { return []; }
  }
  function mentionQuery(area) {
    const before = area.value.slice(0, area.selectionStart);
    const match = /(^|[\s(])@([\w-]*)$/.exec(before);
    return match ? match[2].toLowerCase() : null;
  }
  let mentionIndex = 0;
  function mentionList() { return document.getElementById("mention-list"); }
  function closeMentions() {
    const list = mentionList();
    if (list) { list.hidden = true; list.innerHTML = ""; }
    const area = document.getElementById("composer-text");
    if (area) area.removeAttribute("aria-activedescendant");
  }
  function renderMentions(area) {
    const list = mentionList();
    if (!list) return;
    const query = mentionQuery(area);
    if (query === null) { closeMentions(); return; }
    // Handles that start with what was typed come first (`@s` → @sound_designer, not the
    // first role whose name merely contains an "s"), then matches inside names.
    const candidates = mentionCandidates();
    const found = candidates.filter(function (c) { return c.handle.indexOf(query) === 0; })
      .concat(candidates.filter(function (c) {
        return c.handle.indexOf(query) !== 0 && c.name.toLowerCase().indexOf(query) !== -1;
      }));
    // Nothing to offer, or the handle is already complete: Enter should send.
    if (!found.length || (found.length === 1 && found[0].handle === query)) { closeMentions(); return; }
    mentionIndex = Math.min(mentionIndex, found.length - 1);
    list.innerHTML = "";
    found.forEach(function (c, i) {
      const item = document.createElement("li");
      item.id = "mention-" + c.handle;
      item.setAttribute("role", "option");
      item.dataset.handle = c.handle;
      item.setAttribute("aria-selected", i === mentionIndex ? "true" : "false");
      item.textContent = c.icon + " @" + c.handle + " — " + c.name + (c.muted ? " (muted)" : "");
      list.appendChild(item);
    });
    list.hidden = false;
    area.setAttribute("aria-activedescendant", "mention-" + found[mentionIndex].handle);
  }
  function pickMention(area, handle) {
    const before = area.value.slice(0, area.selectionStart);
    const start = before.lastIndexOf("@");
    area.setSelectionRange(start, area.selectionStart);
    area.value = area.value.slice(0, start) + area.value.slice(area.selectionEnd);
    area.setSelectionRange(start, start);
    insertAtCaret(area, "@" + handle + " ");
    closeMentions();
  }
  function mentionKeys(evt, area) {
    const list = mentionList();
    if (!list || list.hidden) return false;
    const items = list.querySelectorAll("[role=option]");
    if (evt.key === "ArrowDown" || evt.key === "ArrowUp") {
      evt.preventDefault();
      mentionIndex = (mentionIndex + (evt.key === "ArrowDown" ? 1 : -1) + items.length) % items.length;
      renderMentions(area);
      return true;
    }
    if (evt.key === "Enter" || evt.key === "Tab") {
      evt.preventDefault();
      pickMention(area, items[mentionIndex].dataset.handle);
      return true;
    }
    if (evt.key === "Escape") { evt.preventDefault(); closeMentions(); return true; }
    return false;
  }
  document.addEventListener("input", function (evt) {
    if (evt.target.id === "composer-text") { mentionIndex = 0; renderMentions(evt.target); }
  });
  document.addEventListener("mousedown", function (evt) {
    const option = evt.target.closest("#mention-list [role=option]");
    if (!option) return;
    evt.preventDefault();
    pickMention(document.getElementById("composer-text"), option.dataset.handle);
  });
  document.addEventListener("focusout", function (evt) {
    // Close after a moment (a click on an option lands first), unless focus came back.
    const area = evt.target;
    if (area.id === "composer-text") {
      setTimeout(function () { if (document.activeElement !== area) closeMentions(); }, 150);
    }
  });

  // ---- Inline rename: Enter saves, Esc cancels. ----
  // The name field, never the form's hidden CSRF input (which comes first in the sessions list).
  const NAME_FIELD = "input[type=text]";
  function closeRename(form, restore) {
    const input = form.querySelector(NAME_FIELD);
    if (restore && input) input.value = input.dataset.original || "";
    form.hidden = true;
    const owner = form.parentElement;
    owner.querySelectorAll(":scope > a, :scope > .session-main, :scope > .row-actions .rename-toggle, :scope > .rename-toggle")
      .forEach(function (el) { el.hidden = false; });
    const toggle = owner.querySelector(".rename-toggle");
    if (restore && toggle) toggle.focus();
    if (pendingTree && owner.closest("#thread-tree")) {
      const refocus = restore && owner.dataset.thread;
      applyPendingTree();
      if (refocus) {
        const again = document.querySelector('#thread-tree .thread-item[data-thread="' + refocus + '"] .rename-toggle');
        if (again) again.focus();
      }
    }
  }
  document.addEventListener("click", function (evt) {
    const toggle = evt.target.closest(".rename-toggle");
    if (!toggle) return;
    const owner = toggle.closest("li");
    const form = owner.querySelector(".rename-form");
    owner.querySelectorAll(":scope > a, :scope > .session-main").forEach(function (el) { el.hidden = true; });
    form.hidden = false;
    const input = form.querySelector(NAME_FIELD);
    input.focus();
    input.select();
  });
  document.addEventListener("htmx:afterRequest", function (evt) {
    const form = evt.detail.elt.closest && evt.detail.elt.closest(".rename-form");
    if (!form) return;
    if (evt.detail.successful) {
      const input = form.querySelector(NAME_FIELD);
      input.dataset.original = input.value;
      closeRename(form, false);
    }
  });

  // ---- Edit and resend (as a branch). ----
  document.addEventListener("click", function (evt) {
    const toggle = evt.target.closest(".edit-toggle");
    if (toggle) {
      const form = document.getElementById(toggle.getAttribute("aria-controls"));
      form.hidden = !form.hidden;
      toggle.setAttribute("aria-expanded", String(!form.hidden));
      if (!form.hidden) form.querySelector("textarea").focus();
      return;
    }
    const cancel = evt.target.closest(".edit-cancel");
    if (cancel) cancel.closest(".msg-edit").hidden = true;
  });

  // ---- Confirmation for plain forms, dialogs. ----
  document.addEventListener("submit", function (evt) {
    const question = evt.target.dataset && evt.target.dataset.confirm;
    if (question && !window.confirm(question)) evt.preventDefault();
  });
  document.addEventListener("click", function (evt) {
    const opener = evt.target.closest("[data-opens]");
    if (opener) {
      const dialog = document.getElementById(opener.dataset.opens);
      if (dialog && !dialog.open) dialog.showModal();
    }
    const closer = evt.target.closest("[data-closes]");
    if (closer) document.getElementById(closer.dataset.closes).close();
  });
  document.addEventListener("parley:settings-saved", function () {
    setTimeout(function () {
      const dialog = document.getElementById("settings-dialog");
      if (dialog && dialog.open) dialog.close();
    }, 600);
  });

  // ---- Streaming bubbles show how much has arrived. ----
  function updateCounts() {
    document.querySelectorAll(".char-count[data-for]").forEach(function (count) {
      const text = document.getElementById(count.dataset.for);
      if (text) count.textContent = text.textContent.length;
    });
  }
  document.addEventListener("htmx:wsAfterMessage", updateCounts);

  // A routing suggestion pre-fills the composer; the person edits it and sends it.
  document.addEventListener("click", function (evt) {
    const button = evt.target.closest("button.suggestion[data-prefill]");
    if (!button) return;
    const area = document.getElementById("composer-text");
    if (!area) return;
    area.value = button.dataset.prefill + " ";
    grow(area);
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  });

  function openAtLatest() {
    stickToBottom = true;
    followIfSticking();
    const area = document.getElementById("composer-text");
    if (area) { grow(area); area.focus(); }
  }
  // This deferred script runs once the page is parsed but before htmx processes it: start
  // at the latest message now, or the "earlier messages" marker at the top would count as
  // scrolled to and load a page nobody asked for.
  openAtLatest();
  document.addEventListener("DOMContentLoaded", openAtLatest);

  // The thread's sticky role, pushed with the thread's status: the addressing line and the
  // role chips follow it (the session-wide pushes do not know which thread a tab shows).
  function syncSticky() {
    const status = document.getElementById("thread-status");
    if (!status) return;
    const sticky = status.dataset.sticky || "";
    document.querySelectorAll(".role-picker .chip[data-handle]").forEach(function (chip) {
      const on = chip.dataset.handle === sticky;
      chip.classList.toggle("chip--sticky", on);
    });
    document.querySelectorAll(".sticky-name").forEach(function (name) {
      name.textContent = sticky ? "@" + sticky : name.dataset.default;
    });
  }
  document.addEventListener("htmx:oobAfterSwap", syncSticky);
  document.addEventListener("htmx:afterSwap", syncSticky);
  document.addEventListener("htmx:wsAfterMessage", syncSticky);

  // A queued message's Edit opens its form in place.
  document.addEventListener("click", function (evt) {
    const edit = evt.target.closest(".queued-edit");
    const cancel = evt.target.closest(".queued-edit-cancel");
    const item = (edit || cancel) && (edit || cancel).closest(".queued");
    if (!item) return;
    const form = item.querySelector(".queued-edit-form");
    form.hidden = !edit;
    if (edit) form.querySelector("textarea").focus();
  });

  // Files dropped on the message box go to the session's workspace; the Files panel opens
  // with them listed (or with the reason they were refused).
  document.addEventListener("dragover", function (evt) {
    if (evt.target.closest && evt.target.closest("#composer-text")) evt.preventDefault();
  });
  document.addEventListener("drop", function (evt) {
    const area = evt.target.closest && evt.target.closest("#composer-text");
    const chat = document.getElementById("chat");
    if (!area || !chat || !evt.dataTransfer || !evt.dataTransfer.files.length) return;
    evt.preventDefault();
    const data = new FormData();
    Array.prototype.forEach.call(evt.dataTransfer.files, function (file) { data.append("files", file); });
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    fetch(chat.dataset.filesUpload, {
      method: "POST", body: data, credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.value : "", "HX-Request": "true" },
    }).then(function (response) { return response.text(); }).then(function (html) {
      const menu = document.querySelector(".menu--files");
      if (!menu) return;
      menu.querySelector(".menu-items").innerHTML = html;
      menu.open = true;
      htmx.process(menu);
    });
  });
})();
