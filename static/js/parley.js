// Parley's page behaviour: websocket sync, idempotent appends, auto-scroll, composer keys.
(function () {
  "use strict";

  // Sticky things sit just under the top bar, whatever its height (fonts, a phone's layout).
  const topbar = document.querySelector(".topbar");
  if (topbar && "ResizeObserver" in window) {
    new ResizeObserver(function () {
      document.documentElement.style.setProperty("--topbar-height", topbar.getBoundingClientRect().height + "px");
    }).observe(topbar);
  }
  const chatTop = document.getElementById("chat-top");
  if (chatTop && "ResizeObserver" in window) {
    new ResizeObserver(function () {
      document.documentElement.style.setProperty("--chat-top-height", chatTop.getBoundingClientRect().height + "px");
    }).observe(chatTop);
  }

  // A "Copy" button beside a value shown once (a new API token).
  document.addEventListener("click", function (evt) {
    const button = evt.target.closest("[data-copy-target]");
    if (!button || !navigator.clipboard) return;
    const target = document.getElementById(button.dataset.copyTarget);
    navigator.clipboard.writeText(target ? target.textContent.trim() : "").then(
      function () { button.textContent = "Copied"; },
      function () { button.textContent = "Select and copy it"; }
    );
  });

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
    // Opened at a search hit, the page shows a window of the thread: what is newer than the
    // page comes through "later messages", not through the socket's catch-up.
    const chat = document.getElementById("chat");
    if (windowed() && chat) afterSeq = parseInt(chat.dataset.latestSeq || "0", 10);
    log.querySelectorAll("article.msg").forEach(function (el) {
      afterSeq = Math.max(afterSeq, parseInt(el.dataset.seq || "0", 10));
      if (el.dataset.status === "queued" || el.dataset.status === "streaming") {
        pending.push(el.id.replace(/^msg-/, ""));
      }
    });
    const sync = { type: "sync", after_seq: afterSeq, pending: pending };
    // A "while you were away" card still being written: it may have been finished before
    // this socket followed the person's pushes, so the sync asks for it as it is now.
    const card = document.getElementById("digest-card");
    if (card && card.classList.contains("digest-card--pending")) sync.digest = parseInt(card.dataset.digest, 10);
    evt.detail.socketWrapper.send(JSON.stringify(sync));
  });

  // The server asks for a fresh connection (it is restarting, or Redis restarted): reconnect,
  // and the sync on open catches up exactly. htmx itself retries only on errors, backing off
  // up to a minute; a restarting server is back within seconds, so retries stay under 2 s.
  const CLOSE_RECONNECT = 4012;
  htmx.config.wsReconnectDelay = function (retries) {
    return Math.min(2000, 250 * Math.pow(2, retries)) * (0.5 + Math.random() / 2);
  };
  const CLOSE_RELOAD = 4013;  // the person's role in the room changed: show what it allows now
  // Signed out (here or in another tab of this browser), or the account was disabled: the
  // page goes too, and a reload lands on the sign-in page.
  // (Not when this page is what signed out: it is on its way elsewhere already.)
  const CLOSE_SIGNED_OUT = 4401;
  let leaving = false;
  window.addEventListener("beforeunload", function () { leaving = true; });
  document.addEventListener("htmx:wsClose", function (evt) {
    if (evt.detail.event.code === CLOSE_SIGNED_OUT) { if (!leaving) window.location.reload(); return; }
    if (evt.detail.event.code === CLOSE_RELOAD) { setTimeout(function () { window.location.reload(); }, 500); return; }
    if (evt.detail.event.code !== CLOSE_RECONNECT) return;
    setTimeout(evt.detail.socketWrapper.reconnect, 250 + Math.random() * 750);
  });

  function windowed() {
    const later = document.getElementById("later");
    return Boolean(later && !later.hidden);
  }
  // The HTTP response and the websocket both announce new bubbles; keep the first copy —
  // unless the later copy is further along: a reply waiting that it shows started, or one it
  // shows settled (its "streaming" or "done" push may have come before either copy, with no
  // bubble to land on, and then only the later copy knows).
  // A windowed page leaves new ones to its "later messages" loads (they come in order).
  const SETTLED = ["done", "error", "interrupted"];
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    const target = evt.detail.target;
    if (!target || target.id !== "transcript") return;
    if (windowed()) { evt.detail.shouldSwap = false; return; }
    evt.detail.fragment.querySelectorAll("article.msg[id]").forEach(function (el) {
      const there = document.getElementById(el.id);
      if (!there) return;
      const was = there.dataset.status, now = el.dataset.status;
      const started = was === "queued" && now === "streaming" &&
        !there.querySelector(".msg-body")?.textContent.trim();
      const settled = (was === "queued" || was === "streaming") && SETTLED.includes(now);
      if (started || settled) {
        el.removeAttribute("hx-swap-oob");
        there.replaceWith(el);
        htmx.process(el);
      } else {
        el.remove();
      }
    });
  });

  // Streaming text flows in: each pushed piece fades in briefly (parley.css), so text that
  // arrives a few words a tick under load still reads as a steady stream; once shown, it is
  // plain text again.
  const calm = window.matchMedia("(prefers-reduced-motion: reduce)");
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    const target = evt.detail.target;
    if (!target || !target.classList.contains("stream-text") || calm.matches) return;
    const fresh = document.createElement("span");
    fresh.className = "fresh";
    fresh.append(...evt.detail.fragment.childNodes);
    evt.detail.fragment.append(fresh);
    fresh.addEventListener("animationend", function () {
      if (fresh.isConnected) fresh.replaceWith(...fresh.childNodes);
    }, { once: true });
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
    // Names pushed since the tree was rendered have already reached the old one; unread
    // counts are each person's own (a pushed tree carries none), so they stay as they are.
    tree.querySelectorAll(".thread-label[id]").forEach(function (label) {
      const twin = fresh.querySelector("#" + CSS.escape(label.id));
      if (twin) twin.textContent = label.textContent;
    });
    keepBadges(tree, fresh);
    tree.replaceWith(fresh);
    htmx.process(fresh);
    markCurrentThread(fresh);
  }
  function keepBadges(tree, fresh) {
    tree.querySelectorAll(".unread-badge[id]").forEach(function (badge) {
      const twin = fresh.querySelector("#" + CSS.escape(badge.id));
      if (twin) twin.replaceWith(badge.cloneNode(true));
    });
  }
  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    const target = evt.detail.target;
    if (!target || target.id !== "thread-tree") return;
    keepBadges(target, evt.detail.fragment);
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
  // Once the person has dragged the box to a size of their own, it keeps that size.
  function grow(area) {
    if (area.dataset.userSized) return;
    area.style.height = "auto";
    area.style.height = Math.min(area.scrollHeight, window.innerHeight * 0.4) + "px";
  }
  // A press on the box that ends with another height was a drag of its resize grip.
  let userHeight = null;
  let pressHeight = null;
  document.addEventListener("pointerdown", function (evt) {
    pressHeight = evt.target.id === "composer-text" ? evt.target.offsetHeight : null;
  });
  document.addEventListener("pointerup", function () {
    const area = document.getElementById("composer-text");
    if (area && pressHeight !== null && Math.abs(area.offsetHeight - pressHeight) > 2) {
      area.dataset.userSized = "1";
      userHeight = area.style.height || area.offsetHeight + "px";
    }
    pressHeight = null;
  });
  // The new composer keeps the dragged size: marked at the swap (so nothing grows it), sized
  // after the settle (htmx settles the `style` attribute to the new markup's).
  function keepUserHeight() {
    const area = document.getElementById("composer-text");
    if (!area || !userHeight) return;
    area.dataset.userSized = "1";
    if (area.style.height !== userHeight) area.style.height = userHeight;
  }
  document.addEventListener("htmx:afterSwap", keepUserHeight);
  document.addEventListener("htmx:afterSettle", keepUserHeight);

  // Stop shows only while something in the thread runs: a reply waiting or streaming, or
  // queued messages and auto-rounds still to come.
  function syncStop() {
    const stop = document.getElementById("stop-button");
    if (!stop) return;
    const running = document.querySelector(
      "#transcript article[data-status=streaming], #transcript article[data-status=queued], #thread-status .queue, #thread-status .round-state"
    );
    stop.hidden = !running;
  }
  syncStop();
  document.addEventListener("htmx:afterSettle", syncStop);
  document.addEventListener("htmx:wsAfterMessage", syncStop);
  document.addEventListener("htmx:oobAfterSwap", syncStop);
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
    // A composer swapped in a moment ago is wired up only when htmx settles it (20 ms on):
    // an Enter before that would send nothing.
    htmx.process(form);
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
      if (windowed() && evt.detail.xhr && evt.detail.xhr.status < 300) {
        location.assign(location.pathname);  // sent from a window: go to the latest messages
        return;
      }
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

  // One list under the composer, two sources: roles after "@", slash commands after a "/"
  // that starts the message. The message box is its combobox (aria-expanded, active option).
  function mentionCandidates() {
    const picker = document.getElementById("role-picker");
    try { return JSON.parse(picker.dataset.mentions); } catch (e) { return []; }
  }
  function commandCandidates() {
    const data = document.getElementById("slash-commands");
    try { return JSON.parse(data.textContent); } catch (e) { return []; }
  }
  function suggestionQuery(area) {
    const before = area.value.slice(0, area.selectionStart);
    const slash = /^\/(\w*)$/.exec(before);
    if (slash) return { kind: "command", text: slash[1].toLowerCase(), start: 0 };
    const match = /(^|[\s(])@([\w-]*)$/.exec(before);
    if (!match) return null;
    return { kind: "mention", text: match[2].toLowerCase(), start: before.length - match[2].length - 1 };
  }
  function suggestions(query) {
    if (query.kind === "command") {
      return commandCandidates().filter(function (c) { return c.name.indexOf(query.text) === 0; })
        .map(function (c) {
          return { id: "command-" + c.name, insert: "/" + c.name + " ", exact: c.name === query.text,
                   label: c.usage + " — " + c.summary };
        });
    }
    // Handles that start with what was typed come first (`@s` → @sound_designer, not the
    // first role whose name merely contains an "s"), then matches inside names.
    const candidates = mentionCandidates();
    return candidates.filter(function (c) { return c.handle.indexOf(query.text) === 0; })
      .concat(candidates.filter(function (c) {
        return c.handle.indexOf(query.text) !== 0 && c.name.toLowerCase().indexOf(query.text) !== -1;
      }))
      .map(function (c) {
        return { id: "mention-" + c.handle, insert: "@" + c.handle + " ", exact: c.handle === query.text,
                 label: c.icon + " @" + c.handle + " — " + c.name + (c.muted ? " (muted)" : "") };
      });
  }
  let mentionIndex = 0;
  function mentionList() { return document.getElementById("mention-list"); }
  function closeMentions() {
    const list = mentionList();
    if (list) { list.hidden = true; list.innerHTML = ""; }
    const area = document.getElementById("composer-text");
    if (area) {
      area.removeAttribute("aria-activedescendant");
      area.setAttribute("aria-expanded", "false");
    }
  }
  function renderMentions(area) {
    const list = mentionList();
    if (!list) return;
    const query = suggestionQuery(area);
    if (query === null) { closeMentions(); return; }
    const found = suggestions(query);
    // Nothing to offer, or the word is already complete: Enter should send.
    if (!found.length || (found.length === 1 && found[0].exact)) { closeMentions(); return; }
    mentionIndex = Math.min(mentionIndex, found.length - 1);
    list.innerHTML = "";
    list.setAttribute("aria-label", query.kind === "command" ? "Slash commands" : "Roles to mention");
    found.forEach(function (c, i) {
      const item = document.createElement("li");
      item.id = c.id;
      item.setAttribute("role", "option");
      item.dataset.insert = c.insert;
      item.setAttribute("aria-selected", i === mentionIndex ? "true" : "false");
      item.textContent = c.label;
      list.appendChild(item);
    });
    list.hidden = false;
    area.setAttribute("aria-expanded", "true");
    area.setAttribute("aria-activedescendant", found[mentionIndex].id);
    const active = document.getElementById(found[mentionIndex].id);
    if (active && active.scrollIntoView) active.scrollIntoView({ block: "nearest" });
  }
  function pickMention(area, insert) {
    const query = suggestionQuery(area);
    const start = query ? query.start : area.selectionStart;
    area.value = area.value.slice(0, start) + area.value.slice(area.selectionStart);
    area.setSelectionRange(start, start);
    insertAtCaret(area, insert);
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
      pickMention(area, items[mentionIndex].dataset.insert);
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
    pickMention(document.getElementById("composer-text"), option.dataset.insert);
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
    if (evt.target.matches("[data-no-submit]")) { evt.preventDefault(); return; }  // uploads start on their own
    const question = evt.target.dataset && evt.target.dataset.confirm;
    if (question && !window.confirm(question)) evt.preventDefault();
  });
  document.addEventListener("click", function (evt) {
    const opener = evt.target.closest("[data-opens]");
    if (opener) {
      const dialog = document.getElementById(opener.dataset.opens);
      // A dialog whose body is fetched shows no earlier copy while it loads: a Save pressed
      // on that copy would be answered, then overwritten by the fresh form.
      const body = opener.getAttribute("hx-get") && document.querySelector(opener.getAttribute("hx-target"));
      if (body && dialog && !dialog.open) body.innerHTML = '<p class="muted" role="status">Loading…</p>';
      if (dialog && !dialog.open) dialog.showModal();
    }
    const closer = evt.target.closest("[data-closes]");
    if (closer) document.getElementById(closer.dataset.closes).close();
  });
  // Saved while replies stream: the dialog asks how to apply; that question gets the focus
  // (and so comes into view), on its gentler answer.
  document.addEventListener("htmx:afterSettle", function (evt) {
    if (!evt.detail.target || evt.detail.target.id !== "settings-dialog-body") return;
    const next = evt.detail.target.querySelector(".apply-choice button[value=next]");
    if (next) next.focus();
  });
  document.addEventListener("parley:settings-saved", function () {
    setTimeout(function () {
      const dialog = document.getElementById("settings-dialog");
      if (dialog && dialog.open) dialog.close();
    }, 600);
  });

  // A phone's composer is one line wide: its placeholder is the short one, never clipped.
  const narrow = window.matchMedia("(max-width: 720px)");
  function fitPlaceholder() {
    const area = document.getElementById("composer-text");
    if (!area || !area.dataset.placeholderNarrow) return;
    if (!area.dataset.placeholderWide) area.dataset.placeholderWide = area.placeholder;
    area.placeholder = narrow.matches ? area.dataset.placeholderNarrow : area.dataset.placeholderWide;
  }
  narrow.addEventListener("change", fitPlaceholder);
  document.addEventListener("htmx:afterSettle", fitPlaceholder);
  fitPlaceholder();

  // ---- Streaming bubbles show how much has arrived. ----
  function updateCounts() {
    document.querySelectorAll(".char-count[data-for]").forEach(function (count) {
      const text = document.getElementById(count.dataset.for);
      if (!text) return;
      count.textContent = text.textContent.length;
      // "thinking…" until the first text arrives, then how much has.
      const state = count.closest(".msg-state--live");
      if (state) state.toggleAttribute("data-empty", !text.textContent.length);
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
    // Opened from a search hit: that message, highlighted, in the middle of the screen.
    const at = new URLSearchParams(location.search).get("at");
    const hit = at && document.getElementById("msg-" + at);
    if (hit) {
      stickToBottom = false;
      hit.classList.add("msg--found");
      hit.scrollIntoView({ block: "center" });
      return;
    }
    const area = document.getElementById("composer-text");
    if (!transcript()) { stickToBottom = false; return; }  // a list or a form: from its top
    // Back after a while: the "while you were away" card (placed just above what is new)
    // first, rather than the latest message below everything it sums up.
    const card = document.getElementById("digest-card");
    if (card && !card.hidden) {
      stickToBottom = false;
      card.scrollIntoView({ block: "start" });
      if (area) grow(area);
      return;
    }
    stickToBottom = true;
    followIfSticking();
    if (area) { grow(area); area.focus(); }
  }
  // This deferred script runs once the page is parsed but before htmx processes it: start
  // at the latest message now, or the "earlier messages" marker at the top would count as
  // scrolled to and load a page nobody asked for.
  openAtLatest();
  document.addEventListener("DOMContentLoaded", openAtLatest);

  // The thread's sticky role, pushed with the thread's status: the addressing line and the
  // role chips follow it (the session-wide pushes do not know which thread a tab shows).
  const STICKY_NOTE = ", sticky: messages without a mention go here";
  function syncSticky() {
    const status = document.getElementById("thread-status");
    if (!status) return;
    const sticky = status.dataset.sticky || "";
    document.querySelectorAll(".role-picker .chip[data-handle]").forEach(function (chip) {
      const on = chip.dataset.handle === sticky;
      chip.classList.toggle("chip--sticky", on);
      chip.setAttribute("aria-label", chip.dataset.name + (on ? STICKY_NOTE : ""));
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

  // ---- Uploads: the Files dialog's buttons and drop zone go through one upload that keeps a
  // dropped or chosen folder's layout (files dropped on the message box are attachments:
  // attachments.js). ----
  function filesDialog() { return document.getElementById("files-dialog"); }
  function showFilesPanel(html) {
    const dialog = filesDialog();
    if (!dialog) return;
    const body = document.getElementById("files-dialog-body");
    body.innerHTML = html;
    htmx.process(body);
    if (!dialog.open) dialog.showModal();
  }
  // The library's own drop zone (data-drop-url): a folder's documents into the library,
  // answered by the library's panel in place.
  function uploadToLibrary(zone, entries) {
    const data = new FormData();
    entries.forEach(function (entry) { data.append("documents", entry.file, entry.file.name); });
    zone.classList.add("dropzone--busy");
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    fetch(zone.dataset.dropUrl, {
      method: "POST", body: data, credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.value : "", "HX-Request": "true",
                 "HX-Target": "library-panel" },
    }).then(function (response) { return response.text(); }).then(function (html) {
      const panel = document.getElementById("library-panel");
      if (!panel) return;
      panel.outerHTML = html;
      htmx.process(document.getElementById("library-panel"));
    });
  }
  function upload(entries, dropped) {  // [{file, path}], and the zone they were dropped on
    if (dropped && dropped.dataset.dropUrl) {
      if (entries.length) uploadToLibrary(dropped, entries);
      return;
    }
    const chat = document.getElementById("chat");
    if (!chat || !entries.length) return;
    const data = new FormData();
    entries.forEach(function (entry) {
      data.append("files", entry.file);
      data.append("paths", entry.path);
    });
    const folder = document.querySelector("#files-panel input[name=folder]");
    if (folder && folder.value.trim()) data.append("folder", folder.value.trim());
    const zone = document.querySelector("#files-panel [data-dropzone]");
    if (zone) zone.classList.add("dropzone--busy");
    const token = document.querySelector("input[name=csrfmiddlewaretoken]");
    fetch(chat.dataset.filesUpload, {
      method: "POST", body: data, credentials: "same-origin",
      headers: { "X-CSRFToken": token ? token.value : "", "HX-Request": "true" },
    }).then(function (response) { return response.text(); }).then(showFilesPanel);
  }
  // A dropped folder is read entry by entry (its files keep their paths inside it).
  function droppedEntries(transfer) {
    const roots = Array.prototype.map.call(transfer.items || [], function (item) {
      return item.webkitGetAsEntry ? item.webkitGetAsEntry() : null;
    });
    if (!roots.length || roots.some(function (root) { return !root; })) {
      return Promise.resolve(Array.prototype.map.call(transfer.files, function (file) {
        return { file: file, path: file.name };
      }));
    }
    const walk = function (entry, prefix) {
      if (entry.isFile) {
        return new Promise(function (resolve) {
          entry.file(function (file) { resolve([{ file: file, path: prefix + file.name }]); },
                     function () { resolve([]); });
        });
      }
      const reader = entry.createReader();
      const children = [];
      return new Promise(function (resolve) {
        const more = function () {
          reader.readEntries(function (batch) {
            if (!batch.length) {
              Promise.all(children.map(function (child) { return walk(child, prefix + entry.name + "/"); }))
                .then(function (lists) { resolve([].concat.apply([], lists)); });
              return;
            }
            Array.prototype.push.apply(children, batch);
            more();
          }, function () { resolve([]); });
        };
        more();
      });
    };
    return Promise.all(roots.map(function (root) { return walk(root, ""); }))
      .then(function (lists) { return [].concat.apply([], lists); });
  }
  function dropTarget(evt) {
    return evt.target.closest && evt.target.closest("[data-dropzone]");
  }
  document.addEventListener("dragover", function (evt) {
    const target = dropTarget(evt);
    if (!target) return;
    evt.preventDefault();
    if (target.matches("[data-dropzone]")) target.classList.add("dropzone--over");
  });
  document.addEventListener("dragleave", function (evt) {
    const zone = evt.target.closest && evt.target.closest("[data-dropzone]");
    if (zone && !zone.contains(evt.relatedTarget)) zone.classList.remove("dropzone--over");
  });
  document.addEventListener("drop", function (evt) {
    const target = dropTarget(evt);
    if (!target || !evt.dataTransfer || !evt.dataTransfer.files.length) return;
    evt.preventDefault();
    target.classList.remove("dropzone--over");
    droppedEntries(evt.dataTransfer).then(function (entries) { upload(entries, target); });
  });
  // Choosing files (or a folder) uploads them at once.
  document.addEventListener("change", function (evt) {
    const input = evt.target.closest && evt.target.closest("input[type=file][data-upload-now]");
    if (!input || !input.files.length) return;
    upload(Array.prototype.map.call(input.files, function (file) {
      return { file: file, path: file.webkitRelativePath || file.name };
    }));
  });
})();

// ---- Long forms in sections (Model, Context, Roles, Conversation, Tools): a tab row shows
// one section at a time, so each part fits without hunting; a section with an error opens
// first. Without this script every section shows, one after another. ----
(function () {
  "use strict";
  function sectionize(form) {
    const parts = Array.prototype.slice.call(form.querySelectorAll("fieldset[data-section]"));
    if (!parts.length || form.querySelector(".section-tabs")) return;
    const names = [];
    parts.forEach(function (part) { if (names.indexOf(part.dataset.section) < 0) names.push(part.dataset.section); });
    const bar = document.createElement("div");
    bar.className = "section-tabs";
    bar.setAttribute("role", "tablist");
    bar.setAttribute("aria-label", "Sections");
    const show = function (name, focus) {
      bar.querySelectorAll("[role=tab]").forEach(function (tab) {
        const on = tab.dataset.name === name;
        tab.setAttribute("aria-selected", String(on));
        tab.tabIndex = on ? 0 : -1;
        if (on && focus) tab.focus();
      });
      parts.forEach(function (part) { part.hidden = part.dataset.section !== name; });
    };
    names.forEach(function (name) {
      const tab = document.createElement("button");
      tab.type = "button";
      tab.setAttribute("role", "tab");
      tab.dataset.name = name;
      tab.textContent = name;
      tab.addEventListener("click", function () { show(name, false); });
      bar.appendChild(tab);
    });
    bar.addEventListener("keydown", function (evt) {
      if (evt.key !== "ArrowLeft" && evt.key !== "ArrowRight") return;
      evt.preventDefault();
      const current = names.indexOf(bar.querySelector("[aria-selected=true]").dataset.name);
      const step = evt.key === "ArrowRight" ? 1 : names.length - 1;
      show(names[(current + step) % names.length], true);
    });
    parts[0].before(bar);
    const failing = parts.find(function (part) { return part.querySelector(".form-error"); });
    show(failing ? failing.dataset.section : names[0], false);
  }
  function sectionizeAll() { document.querySelectorAll("form.settings-form").forEach(sectionize); }
  document.addEventListener("htmx:afterSettle", sectionizeAll);
  sectionizeAll();
})();

// ---- Session set-up (create dialog and Session settings): provider filter, personas,
// memory editor, role packs. Delegated, so the settings form loaded by htmx works too. ----
(function () {
  "use strict";

  // The provider narrows the credential list; a hidden choice gives way to the first shown
  // one, and the model list reloads for it.
  document.addEventListener("change", function (evt) {
    const filter = evt.target.closest("select[data-filters]");
    if (!filter) return;
    const select = document.getElementById(filter.dataset.filters);
    if (!select) return;
    let firstShown = null;
    Array.prototype.forEach.call(select.options, function (option) {
      const shown = !filter.value || option.dataset.provider === filter.value;
      option.hidden = option.disabled = !shown;
      if (shown && !firstShown) firstShown = option;
    });
    const current = select.options[select.selectedIndex];
    if ((!current || current.hidden) && firstShown) {
      firstShown.selected = true;
      select.dispatchEvent(new Event("change", { bubbles: true }));
    }
  });

  // Picking a saved persona copies its text into this session's persona.
  function copyPersona(picker) {
    const target = document.getElementById(picker.dataset.personaTarget);
    const option = picker.options[picker.selectedIndex];
    if (target && option && option.value) target.value = option.dataset.text || "";
  }
  document.addEventListener("change", function (evt) {
    if (evt.target.matches && evt.target.matches("select[data-persona-target]")) copyPersona(evt.target);
  });
  document.addEventListener("click", function (evt) {
    const add = evt.target.closest("[data-persona-add]");
    if (!add) return;
    const dialog = document.getElementById("persona-dialog");
    const form = dialog.querySelector("form");
    form.reset();
    form.querySelector("input[name=picker]").value = add.dataset.personaAdd;
    dialog.querySelectorAll(".form-error").forEach(function (el) { el.remove(); });
    dialog.showModal();
    dialog.querySelector("#persona-name").focus();
  });
  document.body.addEventListener("parley:persona-saved", function (evt) {
    const picker = document.getElementById(evt.detail.picker);
    if (picker) { copyPersona(picker); picker.focus(); }
    document.getElementById("persona-dialog").close();
  });

  // The memory editor: Plain and Advanced (JSON) views of one text; Done checks the JSON.
  const dialog = document.getElementById("memory-dialog");
  if (dialog) {
    const plain = document.getElementById("memory-plain-text");
    const json = document.getElementById("memory-json-text");
    const state = document.getElementById("memory-json-state");
    const hint = state.textContent;
    let field = null;
    // Engines word parse errors differently (a character offset, or a line and a column);
    // the person gets the line and column either way, and the engine's reason without them.
    // Where a strict JSON reading of `text` first fails (some engines' messages carry no
    // position: "Unexpected token 'T'" for True, a comment, a comma before "]").
    const firstJsonError = function (text) {
      let i = 0;
      const fail = function () { throw i; };
      const space = function () { while (i < text.length && " \t\n\r".indexOf(text[i]) >= 0) i++; };
      const literal = function (word) { if (text.startsWith(word, i)) i += word.length; else fail(); };
      const string = function () {
        i++;
        while (i < text.length && text[i] !== '"') {
          if (text.charCodeAt(i) < 0x20) fail();
          i += text[i] === "\\" ? 2 : 1;
        }
        if (i >= text.length) fail();
        i++;
      };
      const number = function () {
        const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
        if (!match) fail();
        i += match[0].length;
      };
      const value = function () {
        space();
        const c = text[i];
        if (c === "{" || c === "[") {
          const close = c === "{" ? "}" : "]";
          i++; space();
          if (text[i] === close) { i++; return; }
          for (;;) {
            space();
            if (close === "}") { if (text[i] !== '"') fail(); string(); space(); if (text[i] !== ":") fail(); i++; }
            value(); space();
            if (text[i] === ",") { i++; continue; }
            if (text[i] === close) { i++; return; }
            fail();
          }
        }
        if (c === '"') return string();
        if (c === "t") return literal("true");
        if (c === "f") return literal("false");
        if (c === "n") return literal("null");
        number();
      };
      try { value(); space(); if (i < text.length) fail(); } catch (at) { return typeof at === "number" ? at : null; }
      return null;
    };
    const whereJsonBroke = function (text, message) {
      let line = null, column = null;
      const at = /position (\d+)/.exec(message);
      const lineCol = /line (\d+) column (\d+)/.exec(message);
      const found = at ? Number(at[1]) : firstJsonError(text);
      if (lineCol) {
        line = Number(lineCol[1]); column = Number(lineCol[2]);
      } else if (found !== null) {
        const before = text.slice(0, found).split("\n");
        line = before.length; column = before[before.length - 1].length + 1;
      }
      const reason = message.replace(/^JSON\.parse: /, "").replace(/\s*(in JSON )?at position \d+.*$/, "")
        .replace(/\s*at line \d+ column \d+.*$/, "").replace(/\s*\(line \d+ column \d+\)/, "")
        .replace(/, (\.\.\.)?".*"(\.\.\.)? is not valid JSON$/s, "");
      return (line ? "line " + line + ", column " + column + ": " : "") + reason.replace(/\.?$/, ".");
    };
    const asDocument = function (text) {
      try {
        const value = JSON.parse(text);
        if (value && typeof value === "object") return value;
      } catch (e) { /* plain text */ }
      return null;
    };
    const jsonError = function (text) {
      if (!text.trim()) return "";
      try {
        const value = JSON.parse(text);
        return value && typeof value === "object" ? "" : "The memory in JSON is an object { … } or a list [ … ].";
      } catch (e) { return "Not valid JSON yet: " + whereJsonBroke(text, e.message); }
    };
    const showView = function (name) {
      dialog.querySelectorAll("[role=tab]").forEach(function (tab) {
        const on = tab.getAttribute("aria-controls") === "memory-" + name;
        tab.setAttribute("aria-selected", String(on));
        tab.tabIndex = on ? 0 : -1;
        document.getElementById(tab.getAttribute("aria-controls")).hidden = !on;
      });
    };
    const current = function () { return document.getElementById("memory-json").hidden ? "text" : "json"; };
    const switchTo = function (name) {
      if (name === current()) return;
      if (name === "json") {
        // Plain notes become a JSON object with one note per line; JSON stays as it is.
        const text = plain.value.trim();
        const doc = asDocument(text);
        const notes = text ? text.split("\n").map(function (l) { return l.trim(); }).filter(Boolean) : [];
        json.value = doc ? JSON.stringify(doc, null, 2) : (text ? JSON.stringify({ notes: notes }, null, 2) : "");
        state.textContent = hint;
      } else {
        plain.value = json.value;
      }
      showView(name);
    };
    dialog.addEventListener("click", function (evt) {
      const tab = evt.target.closest("[role=tab]");
      if (tab) switchTo(tab.getAttribute("aria-controls").replace("memory-", "") === "plain" ? "text" : "json");
    });
    dialog.addEventListener("keydown", function (evt) {
      const tab = evt.target.closest("[role=tab]");
      if (!tab || (evt.key !== "ArrowLeft" && evt.key !== "ArrowRight")) return;
      evt.preventDefault();
      switchTo(current() === "text" ? "json" : "text");
      dialog.querySelector("[role=tab][aria-selected=true]").focus();
    });
    json.addEventListener("input", function () {
      state.textContent = jsonError(json.value) || "Valid JSON.";
    });
    document.addEventListener("click", function (evt) {
      const opener = evt.target.closest("[data-memory-edit]");
      if (!opener) return;
      field = document.getElementById(opener.dataset.memoryEdit);
      const format = document.getElementById(field.id + "-format");
      plain.value = json.value = field.value;
      state.textContent = hint;
      showView(format && format.value === "json" ? "json" : "plain");
      dialog.showModal();
      (current() === "json" ? json : plain).focus();
    });
    document.getElementById("memory-done").addEventListener("click", function () {
      if (!field) return;
      const format = current();
      const value = format === "json" ? json.value : plain.value;
      const problem = format === "json" ? jsonError(value) : "";
      if (problem) {
        state.textContent = problem;
        state.setAttribute("role", "alert");
        json.focus();
        return;
      }
      state.removeAttribute("role");
      field.value = format === "json" && value.trim() ? JSON.stringify(JSON.parse(value), null, 2) : value;
      document.getElementById(field.id + "-format").value = format;
      const preview = document.getElementById(field.id + "-preview");
      if (preview) preview.textContent = field.value.trim() || preview.dataset.empty;
      dialog.close();
    });
  }

  // A role pack ticks exactly its roles.
  document.addEventListener("change", function (evt) {
    const pack = evt.target.closest("select[data-role-pack]");
    if (!pack || !pack.value) return;
    document.querySelectorAll("#" + pack.dataset.rolePack + " input[type=checkbox]").forEach(function (box) {
      box.checked = box.dataset.pack === pack.value;
    });
  });

  // A form sent without a script came back with errors: show it again, open.
  document.querySelectorAll("dialog[data-open-on-load]").forEach(function (d) { d.showModal(); });
})();

// ---- Small screens, screen readers and the keyboard. ----
(function () {
  "use strict";
  const narrow = window.matchMedia("(max-width: 720px)");

  // The role picker folds away (closed by default on a phone); the choice is remembered.
  const drawer = document.getElementById("role-drawer");
  if (drawer) {
    const saved = localStorage.getItem("parley.roles-open");
    drawer.open = saved === null ? !narrow.matches : saved === "1";
    // Only a person's choice is remembered: the browser also fires "toggle" for the state
    // the page was parsed with, which would pin a wide screen's open drawer on a phone.
    const summary = drawer.querySelector("summary");
    if (summary) summary.addEventListener("click", function () {
      setTimeout(function () {
        localStorage.setItem("parley.roles-open", drawer.open ? "1" : "0");
      });
    });
  }

  // The threads sidebar is a drawer on a phone: the Threads button opens it, Esc, a thread
  // link or a tap outside closes it.
  const sidebar = document.getElementById("sidebar");
  const opener = document.getElementById("threads-toggle");
  function setDrawer(open) {
    if (!sidebar || !opener) return;
    sidebar.classList.toggle("sidebar--open", open);
    opener.setAttribute("aria-expanded", String(open));
    if (open) {
      const current = sidebar.querySelector("[aria-current=page]") || sidebar.querySelector("a, button");
      if (current) current.focus();
    }
  }
  if (opener) {
    opener.addEventListener("click", function () { setDrawer(!sidebar.classList.contains("sidebar--open")); });
    document.getElementById("threads-close").addEventListener("click", function () {
      setDrawer(false);
      opener.focus();
    });
    document.addEventListener("click", function (evt) {
      if (!sidebar.classList.contains("sidebar--open")) return;
      if (!sidebar.contains(evt.target) && !opener.contains(evt.target)) setDrawer(false);
    });
    document.addEventListener("keydown", function (evt) {
      if (evt.key === "Escape" && sidebar.classList.contains("sidebar--open")) {
        evt.preventDefault();
        setDrawer(false);
        opener.focus();
      }
    }, true);
  }

  // Screen readers hear a reply start and settle, not every streamed word: the transcript
  // is not a live region; a status line announces changes of a reply's state.
  const announcer = document.getElementById("announcer");
  const known = new Map();
  function scanReplies(announce) {
    document.querySelectorAll("#transcript article.msg--role, #transcript article.msg[data-status]").forEach(function (el) {
      if (el.dataset.speaker === "user" || !el.dataset.speaker) return;
      const before = known.get(el.id);
      const now = el.dataset.status;
      known.set(el.id, now);
      if (!announce || before === now) return;
      const who = el.querySelector(".speaker");
      const name = who ? who.textContent.trim() : "A role";
      let line = "";
      if (now === "streaming" && before !== "streaming") line = name + " is replying.";
      else if (now === "done" && before) line = name + " has replied.";
      else if (now === "error") line = name + "'s reply failed.";
      else if (now === "interrupted" && before) line = name + " was stopped.";
      if (line && announcer) {
        announcer.textContent = "";
        setTimeout(function () { announcer.textContent = line; }, 30);
      }
      if (before && (now === "done" || now === "error" || now === "interrupted")) settled = true;
    });
    // Every reply of the turn has settled: the page marks what it shows as seen.
    if (settled && !document.querySelector(
      "#transcript article[data-status=streaming], #transcript article[data-status=queued]")) {
      document.dispatchEvent(new CustomEvent("parley:turn-settled"));
      settled = false;
    }
  }
  let settled = false;
  if (announcer) {
    scanReplies(false);
    document.addEventListener("htmx:wsAfterMessage", function () { scanReplies(true); });
    document.addEventListener("htmx:afterSettle", function () { scanReplies(true); });
  }

  // Shortcuts, outside text fields: g n new chat, g s session settings, / the message box,
  // ? the list of shortcuts.
  function typing(target) {
    return target.closest && target.closest("input, textarea, select, [contenteditable=true]");
  }
  let pendingG = 0;
  document.addEventListener("keydown", function (evt) {
    if (evt.ctrlKey || evt.metaKey || evt.altKey || evt.isComposing || typing(evt.target)) return;
    if (document.querySelector("dialog[open]:not(#shortcuts-dialog)")) return;
    const now = Date.now();
    if (pendingG && now - pendingG < 1200) {
      pendingG = 0;
      const target = evt.key === "n" ? document.getElementById("new-chat")
        : evt.key === "s" ? document.getElementById("settings-open") : null;
      if (target) { evt.preventDefault(); target.click(); }
      return;
    }
    if (evt.key === "g") { pendingG = now; return; }
    if (evt.key === "/") {
      const area = document.getElementById("composer-text");
      if (area) { evt.preventDefault(); area.focus(); }
    } else if (evt.key === "?") {
      const help = document.getElementById("shortcuts-dialog");
      if (help) { evt.preventDefault(); help.open ? help.close() : help.showModal(); }
    }
  });
})();

// ---- Times: "3 min ago" beside each message, the exact local time on hover. ----
(function () {
  "use strict";
  const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const day = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
  const dayOfYear = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric" });
  function relative(when, now) {
    const seconds = Math.max(0, (now - when) / 1000);
    if (seconds < 45) return "just now";
    if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
    if (seconds < 6 * 3600) return Math.round(seconds / 3600) + " h ago";
    const sameDay = new Date(now).toDateString() === when.toDateString();
    // Another year's message (an imported chat) says its year.
    const sameYear = new Date(now).getFullYear() === when.getFullYear();
    return (sameDay ? "" : (sameYear ? day : dayOfYear).format(when) + ", ") + clock.format(when);
  }
  // All of them every 30 s; after a swap, only the new ones (a stream pushes many frames).
  function refreshTimes(onlyNew) {
    const now = Date.now();
    const selector = onlyNew ? "time.msg-time:not([data-local])" : "time.msg-time[datetime]";
    document.querySelectorAll(selector).forEach(function (el) {
      const when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) return;
      el.textContent = relative(when, now);
      el.title = exact.format(when);
      el.dataset.local = "1";
    });
  }
  refreshTimes(false);
  document.addEventListener("htmx:afterSettle", function () { refreshTimes(true); });
  document.addEventListener("htmx:wsAfterMessage", function () { refreshTimes(true); });
  setInterval(function () { refreshTimes(false); }, 30000);
})();

// ---- Copy: a code block's text, or a message's Markdown source (fetched: a reply's source
// is not in the page). The button says "Copied" for a moment, and so does the status line. ----
(function () {
  "use strict";
  function confirm(button, ok) {
    const label = button.textContent;
    button.textContent = ok ? "Copied" : "Copy failed";
    button.classList.add("copied");
    const announcer = document.getElementById("announcer");
    if (announcer) announcer.textContent = ok ? "Copied to the clipboard." : "Could not copy.";
    setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1500);
  }
  document.addEventListener("click", function (evt) {
    const code = evt.target.closest("button.copy-code");
    if (code) {
      const block = code.parentElement.querySelector("pre");
      navigator.clipboard.writeText(block ? block.innerText.replace(/\n$/, "") : "")
        .then(function () { confirm(code, true); }, function () { confirm(code, false); });
      return;
    }
    const message = evt.target.closest("button.copy-message[data-source]");
    if (!message) return;
    // The text is fetched inside the click's clipboard write (a promise in the item keeps the
    // user's gesture valid while the request runs).
    const text = fetch(message.dataset.source, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.blob();
    }).then(function (blob) { return new Blob([blob], { type: "text/plain" }); });
    navigator.clipboard.write([new ClipboardItem({ "text/plain": text })])
      .then(function () { confirm(message, true); }, function () { confirm(message, false); });
  });
})();

// ---- While you were away: what is new since the thread was last seen, marks of what has
// been seen, and a browser notification when a turn finishes in a hidden tab. ----
(function () {
  "use strict";
  const chat = document.getElementById("chat");
  if (!chat) return;
  // The divider goes before the first reply that settled after the last visit (the person's
  // own messages were seen as they were sent), unless nothing comes before it.
  const seenBefore = parseInt(chat.dataset.seenSeq || "0", 10);
  const first = Array.prototype.find.call(
    document.querySelectorAll("#transcript article.msg"),
    function (el) { return parseInt(el.dataset.seq || "0", 10) > seenBefore && el.dataset.speaker !== "user"; });
  if (first && (seenBefore > 0 || first.previousElementSibling)) {
    const divider = document.createElement("div");
    divider.className = "new-divider";
    divider.setAttribute("role", "separator");
    divider.textContent = "New since you left";
    first.before(divider);
    const card = document.getElementById("digest-card");
    if (card) divider.before(card);  // what it sums up starts just below it
  }
  // The tab is looked at: everything it shows has been seen. Whatever way a reply arrived
  // (streamed, or already settled when the tab first saw it), once nothing is running the
  // newest message shown is marked; and the badge of the thread on screen stays hidden.
  let timer = null;
  let markedSeq = seenBefore;
  function shownSeq() {
    let seq = 0;
    document.querySelectorAll("#transcript article.msg").forEach(function (el) {
      seq = Math.max(seq, parseInt(el.dataset.seq || "0", 10));
    });
    return seq;
  }
  function ownBadge() { return document.getElementById("unread-" + chat.dataset.thread); }
  function markSeen() {
    if (document.hidden) return;
    const badge = ownBadge();
    if (badge) badge.hidden = true;
    clearTimeout(timer);
    timer = setTimeout(function () {
      const seq = shownSeq();
      markedSeq = Math.max(markedSeq, seq);
      const token = document.querySelector("input[name=csrfmiddlewaretoken]");
      const data = new FormData();
      data.append("seq", String(seq));
      fetch(chat.dataset.seenUrl, { method: "POST", body: data, credentials: "same-origin",
        headers: { "X-CSRFToken": token ? token.value : "" } });
    }, 800);
  }
  function markSeenIfNew() {
    if (document.hidden) return;
    const badge = ownBadge();
    const running = document.querySelector(
      "#transcript article[data-status=streaming], #transcript article[data-status=queued]");
    if ((!running && shownSeq() > markedSeq) || (badge && !badge.hidden)) markSeen();
  }
  document.addEventListener("parley:turn-settled", markSeen);
  document.addEventListener("visibilitychange", markSeen);
  document.addEventListener("htmx:wsAfterMessage", markSeenIfNew);
  document.addEventListener("htmx:afterSettle", markSeenIfNew);

})();

// A shared room: say when this person types (at most every two seconds, over the tab's
// socket), and show who else is typing for a few seconds after each signal.
(function () {
  "use strict";
  const line = document.getElementById("typing-line");
  const signals = document.getElementById("typing-events");
  if (!line || !signals || !document.getElementById("room-presence")) return;
  let socket = null;
  document.addEventListener("htmx:wsOpen", function (evt) { socket = evt.detail.socketWrapper; });
  document.addEventListener("htmx:wsClose", function () { socket = null; });
  let lastSent = 0;
  document.addEventListener("input", function (evt) {
    if (!evt.target.closest || !evt.target.closest("#composer") || !socket) return;
    const now = Date.now();
    if (now - lastSent < 2000) return;
    lastSent = now;
    socket.send(JSON.stringify({ type: "typing" }));
  });
  const typing = new Map();  // user id -> {name, until}
  function show() {
    const now = Date.now();
    typing.forEach(function (who, id) { if (who.until <= now) typing.delete(id); });
    const names = Array.from(typing.values()).map(function (who) { return who.name; });
    line.textContent = names.length === 0 ? "" : names.length === 1 ? names[0] + " is typing…"
      : names.slice(0, -1).join(", ") + " and " + names[names.length - 1] + " are typing…";
  }
  setInterval(show, 1000);
  new MutationObserver(function () {
    signals.querySelectorAll("span[data-user]").forEach(function (el) {
      typing.set(el.dataset.user, { name: el.dataset.name, until: Date.now() + 4000, since: latestSeq() });
      el.remove();
    });
    show();
  }).observe(signals, { childList: true });
  function latestSeq() {
    let latest = 0;
    document.querySelectorAll("#transcript article.msg").forEach(function (el) {
      latest = Math.max(latest, parseInt(el.dataset.seq || "0", 10));
    });
    return latest;
  }
  // A person's message arrives: they have stopped typing.
  document.addEventListener("htmx:oobAfterSwap", function () {
    if (!typing.size) return;
    typing.forEach(function (who, id) {
      document.querySelectorAll('#transcript article.msg--user[data-author="' + CSS.escape(id) + '"]').forEach(function (el) {
        if (parseInt(el.dataset.seq || "0", 10) > who.since) typing.delete(id);
      });
    });
    show();
  });
})();

// While you were away: every page of a signed-in person hears when one of their turns
// finishes (the server appends a notice, and the session's badge, to #turn-notices). A hidden tab, or
// a tab on another session, raises a browser notification; one per turn however many tabs
// are open.
(function () {
  "use strict";
  const notices = document.getElementById("turn-notices");
  // One in the top bar, one in the account menu for phones.
  const buttons = document.querySelectorAll(".notify-toggle");
  const supported = "Notification" in window;
  // Permission is asked for only from a button, never on page load.
  function showButtons() {
    buttons.forEach(function (button) {
      button.hidden = !supported || Notification.permission !== "default";
    });
  }
  showButtons();
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      Notification.requestPermission().then(showButtons);
    });
  });
  if (!notices) return;

  // Every open tab gets the notice; one notifies. A Web Lock taken without waiting decides
  // between tabs that hear it together (localStorage reaches other tabs only eventually) and
  // is held a while; the stored list catches a tab that hears it later.
  function claimedBefore(key) {
    try {
      const claimed = JSON.parse(localStorage.getItem("parley-notified") || "[]");
      if (claimed.indexOf(key) !== -1) return true;
      claimed.push(key);
      localStorage.setItem("parley-notified", JSON.stringify(claimed.slice(-50)));
    } catch (err) { /* storage refused: the notification's tag still folds duplicates */ }
    return false;
  }
  // The page says which notice it last decided on (shown or left to another tab), so a test
  // can wait for every tab's decision instead of for a while.
  function decided(key) { notices.dataset.decided = key; }
  function once(key, show) {
    if (!navigator.locks) { if (!claimedBefore(key)) show(); decided(key); return; }
    navigator.locks.request("parley-notify:" + key, { ifAvailable: true }, function (lock) {
      const mine = lock && !claimedBefore(key);
      if (mine) show();
      decided(key);
      return mine ? new Promise(function (release) { setTimeout(release, 10000); }) : undefined;
    });
  }
  function notify(notice) {
    const chat = document.getElementById("chat");
    const here = chat ? chat.dataset.session : "";
    const key = notice.thread + ":" + notice.seq;
    if (!supported || Notification.permission !== "granted") return decided(key);
    const thread = chat ? chat.dataset.thread : "";
    // The person is looking at it (a mention of them: only when it is the very thread).
    if (!document.hidden && notice.session === here && (!notice.always || notice.thread === thread)) return decided(key);
    once(key, function () {
      const shown = new Notification(notice.title, { body: notice.body, tag: "parley-" + notice.thread });
      shown.onclick = function () {
        window.focus();
        window.location.href = notice.url;
        shown.close();
      };
    });
  }
  new MutationObserver(function () {
    // A session's badge: only a page that shows it (the sessions list) has one to replace.
    notices.querySelectorAll(".badge-update").forEach(function (el) {
      const badge = el.firstElementChild;
      const shown = badge && document.getElementById(badge.id);
      if (shown) shown.replaceWith(badge);
      el.remove();
    });
    notices.querySelectorAll(".turn-notice").forEach(function (el) {
      const notice = Object.assign({}, el.dataset);
      el.remove();
      notify(notice);
    });
  }).observe(notices, { childList: true });
})();

// A reply's citation of the library opens its passage in place (the link is a page of its
// own without script, or in a new tab).
(function () {
  "use strict";
  document.addEventListener("click", function (evt) {
    const link = evt.target.closest && evt.target.closest('#transcript a[href*="/library/"][href*="/passages/"]');
    if (!link || evt.ctrlKey || evt.metaKey || evt.shiftKey || !window.htmx) return;
    const dialog = document.getElementById("passage-dialog");
    if (!dialog) return;
    evt.preventDefault();
    document.getElementById("passage-dialog-body").innerHTML = '<p class="muted" role="status">Loading…</p>';
    if (!dialog.open) dialog.showModal();
    htmx.ajax("GET", link.getAttribute("href"), { target: "#passage-dialog-body", swap: "innerHTML" });
  });
})();
