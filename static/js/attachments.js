// Attachments in the composer: the Attach button (on a phone, the system picker with the
// camera), pasting images or files from the clipboard, and dropping them anywhere on a thread's
// page. Each upload shows as a chip with a progress bar until the server answers with the
// file's chip (a thumbnail or an icon, the name, the size, a remove button) or a sentence
// saying why it was refused; the message box is never touched. Sent with the message.
// Sent attachments open in the lightbox.
(function () {
  "use strict";

  function parts() {
    const form = document.getElementById("composer");
    if (!form) return null;
    return {
      form: form,
      list: form.querySelector("#attachment-chips"),
      button: form.querySelector("#attach-button"),
      input: form.querySelector("#attach-input"),
      text: form.querySelector("#composer-text"),
      refusals: form.querySelector("#attachment-refusals"),
    };
  }

  // With an attachment the text may be empty; the list hides when it holds nothing.
  // A refused file's sentence goes under the message box (the chips stay above it), with a
  // button that dismisses it.
  function sync() {
    const p = parts();
    if (!p || !p.list) return;
    if (p.refusals) {
      p.list.querySelectorAll(".attachment-refused").forEach(function (item) { p.refusals.appendChild(item); });
      p.refusals.hidden = p.refusals.children.length === 0;
    }
    const attached = p.list.querySelector('input[name="attachments"]') !== null;
    if (p.text) p.text.required = !attached;
    p.list.hidden = p.list.children.length === 0;
  }

  function refusal(sentence) {
    const item = document.createElement("li");
    item.className = "attachment-refused";
    const said = document.createElement("span");
    said.setAttribute("role", "alert");
    said.textContent = sentence;
    const dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "attachment-dismiss";
    dismiss.setAttribute("aria-label", "Dismiss");
    dismiss.textContent = "×";
    item.append(said, dismiss);
    return item;
  }

  // A pasted picture comes as "image.png" whatever it is: it gets the time it was pasted
  // instead ("pasted 2026-11-28 21.35.png"), so the pictures of a message tell apart.
  function pastedName(file, index, count) {
    const now = new Date();
    const two = function (n) { return String(n).padStart(2, "0"); };
    const stamp = now.getFullYear() + "-" + two(now.getMonth() + 1) + "-" + two(now.getDate()) +
      " " + two(now.getHours()) + "." + two(now.getMinutes()) + "." + two(now.getSeconds());
    const extension = (file.type.split("/")[1] || "bin").replace("jpeg", "jpg").replace(/[^a-z0-9]/g, "");
    return "pasted " + stamp + (count > 1 ? " (" + (index + 1) + ")" : "") + "." + extension;
  }

  function upload(files, pasted) {
    const p = parts();
    if (!p || !p.list || !files.length) return;
    if (files.length > 20) {  // the server's limit, said before anything is sent
      p.list.appendChild(refusal("Attach at most 20 files at once."));
      sync();
      return;
    }
    const data = new FormData();
    Array.from(files).forEach(function (file, index) {
      const generic = !file.name || (pasted && /^image\.(png|jpe?g|gif|webp)$/i.test(file.name));
      const name = generic ? pastedName(file, index, files.length) : file.name;
      data.append("files", file, name);
    });
    const pending = document.createElement("li");
    pending.className = "attachment-chip attachment-chip--uploading";
    const label = document.createElement("span");
    label.className = "attachment-name";
    label.textContent = files.length === 1 ? (files[0].name || "Pasted image") : files.length + " files";
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", "Uploading " + label.textContent);
    pending.append(label, bar);
    p.list.appendChild(pending);
    sync();
    const request = new XMLHttpRequest();
    request.open("POST", p.button.dataset.attachUrl);
    request.setRequestHeader("X-CSRFToken", p.form.querySelector('[name="csrfmiddlewaretoken"]').value);
    request.setRequestHeader("HX-Request", "true");
    request.upload.addEventListener("progress", function (event) {
      if (event.lengthComputable) bar.value = Math.round((100 * event.loaded) / event.total);
    });
    request.addEventListener("load", function () {
      if (request.status === 200 || request.status === 422) {
        const holder = document.createElement("template");
        holder.innerHTML = request.responseText;  // rendered by the server, names escaped
        const added = Array.from(holder.content.children);
        pending.replaceWith.apply(pending, added);
        added.forEach(function (node) { if (window.htmx) window.htmx.process(node); });
      } else if (request.status === 413) {
        pending.replaceWith(refusal("That is more than the server takes in one upload: attach fewer or smaller files."));
      } else {
        pending.replaceWith(refusal(request.responseText.slice(0, 300) || "The upload failed (" + request.status + "): try again."));
      }
      sync();
    });
    request.addEventListener("error", function () {
      pending.replaceWith(refusal("The upload did not reach the server: check the connection and try again."));
      sync();
    });
    request.send(data);
  }

  document.addEventListener("click", function (event) {
    if (event.target.closest("#attach-button")) {
      const p = parts();
      if (p && p.input) p.input.click();
    }
    const refused = event.target.closest(".attachment-refused");
    if (refused) { refused.remove(); sync(); }
  });
  document.addEventListener("change", function (event) {
    if (event.target.id === "attach-input") {
      upload(Array.from(event.target.files || []));
      event.target.value = "";
    }
  });
  document.addEventListener("paste", function (event) {
    if (!event.target.closest || !event.target.closest("#composer")) return;
    const files = Array.from((event.clipboardData && event.clipboardData.files) || []);
    if (files.length) {
      event.preventDefault();  // the picture, not its file name, is what was pasted
      upload(files, true);
    }
  });

  // Dropping files anywhere on a thread's page attaches them.
  // The Files dialog's drop zone puts files in the workspace instead (parley.js).
  function carriesFiles(event) {
    if (event.target.closest && event.target.closest("[data-dropzone]")) return false;
    return event.dataTransfer && Array.from(event.dataTransfer.types || []).indexOf("Files") !== -1;
  }
  document.addEventListener("dragover", function (event) {
    if (!parts() || !carriesFiles(event)) return;
    event.preventDefault();
    document.body.classList.add("dropping-files");
  });
  document.addEventListener("dragleave", function (event) {
    if (event.relatedTarget === null) document.body.classList.remove("dropping-files");
  });
  document.addEventListener("drop", function (event) {
    document.body.classList.remove("dropping-files");
    if (!parts() || !carriesFiles(event)) return;
    event.preventDefault();
    upload(Array.from(event.dataTransfer.files || []));
  });
  // The lightbox: a thumbnail (or a PDF's first page) opens large with its name, facts and
  // the description text-only models read; ← and → go through the message's pictures, Esc
  // closes, and the focus goes back to the thumbnail.
  let gallery = [];
  let shown = 0;
  let opener = null;

  function show(index) {
    const box = document.getElementById("lightbox");
    if (!box || !gallery.length) return;
    shown = (index + gallery.length) % gallery.length;
    const link = gallery[shown];
    const data = link.dataset;
    document.getElementById("lightbox-title").textContent = data.name || "";
    document.getElementById("lightbox-facts").textContent =
      (data.kind === "pdf" ? "PDF, its first page · " : "") + (data.facts || "");
    document.getElementById("lightbox-position").textContent =
      gallery.length > 1 ? (shown + 1) + " of " + gallery.length : "";
    const image = document.getElementById("lightbox-image");
    image.src = data.src;
    image.alt = data.kind === "pdf" ? "The first page of " + data.name : data.name;
    const open = document.getElementById("lightbox-open");
    open.href = link.getAttribute("href");
    open.textContent = data.kind === "pdf" ? "Download the PDF" : "Open full size";
    if (data.kind === "pdf") open.setAttribute("download", ""); else open.removeAttribute("download");
    document.getElementById("lightbox-saved").textContent = "";
    const library = document.getElementById("lightbox-library");
    if (library) library.hidden = !data.libraryUrl;
    const description = document.getElementById("lightbox-description");
    description.hidden = !data.description;
    document.getElementById("lightbox-description-text").textContent = data.description || "";
    document.getElementById("lightbox-described-by").textContent =
      data.describedBy ? "Written once by " + data.describedBy + "." : "";
    box.querySelectorAll("[data-lightbox-step]").forEach(function (button) {
      button.hidden = gallery.length < 2;
    });
  }

  function post(url, fields, done) {
    const p = parts();
    const token = document.querySelector('[name="csrfmiddlewaretoken"]');
    const body = new FormData();
    Object.keys(fields).forEach(function (key) { body.append(key, fields[key]); });
    fetch(url, {method: "POST", body: body, credentials: "same-origin",
                headers: {"X-CSRFToken": token ? token.value : "", "HX-Request": "true"}})
      .then(function (response) {
        return response.text().then(function (text) { done(response.status, text, p); });
      })
      .catch(function () { done(0, "The request did not reach the server: try again.", p); });
  }

  // A file of the session's workspace (the Files dialog's Attach) goes into the composer.
  document.addEventListener("click", function (event) {
    const pick = event.target.closest && event.target.closest("[data-attach-path]");
    const p = parts();
    if (!pick || !p || !p.list) return;
    pick.disabled = true;
    post(p.button.dataset.fromFilesUrl, {path: pick.dataset.attachPath}, function (status, text) {
      pick.disabled = false;
      const holder = document.createElement("template");
      holder.innerHTML = status === 200 || status === 422 ? text : "";
      const added = Array.from(holder.content.children);
      if (!added.length) added.push(refusal(text.slice(0, 300) || "Could not attach it."));
      added.forEach(function (node) {
        p.list.appendChild(node);
        if (window.htmx) window.htmx.process(node);
      });
      sync();
      const dialog = pick.closest("dialog");
      if (status === 200 && dialog) dialog.close();  // the chip shows in the composer
    });
  });

  // "Save to files" (the session's workspace) and "To library" (a PDF into the session's
  // library): a whispered file (409) goes there only once the person agrees that everyone in
  // the room will see it.
  let savingTo = "saveUrl";
  function saveShown(fields) {
    const saved = document.getElementById("lightbox-saved");
    post(gallery[shown].dataset[savingTo], fields, function (status, text) {
      saved.textContent = text.slice(0, 400) || "Could not save it (" + status + ").";
      if (status !== 409) return;
      const confirm = document.createElement("button");
      confirm.type = "button";
      confirm.className = "secondary";
      confirm.id = "lightbox-save-everyone";
      confirm.textContent = savingTo === "libraryUrl" ? "Add for everyone" : "Save for everyone";
      saved.append(" ", confirm);
    });
  }
  document.addEventListener("click", function (event) {
    if (!event.target.closest || !gallery.length) return;
    if (event.target.closest("#lightbox-save")) { savingTo = "saveUrl"; saveShown({}); }
    else if (event.target.closest("#lightbox-library")) { savingTo = "libraryUrl"; saveShown({}); }
    else if (event.target.closest("#lightbox-save-everyone")) saveShown({everyone: "1"});
  });

  document.addEventListener("click", function (event) {
    const step = event.target.closest && event.target.closest("[data-lightbox-step]");
    if (step) {
      show(shown + Number(step.dataset.lightboxStep));
      return;
    }
    const link = event.target.closest && event.target.closest("a[data-lightbox]");
    const box = document.getElementById("lightbox");
    if (!link || !box || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    const list = link.closest(".msg-attachments");
    gallery = list ? Array.from(list.querySelectorAll("a[data-lightbox]")) : [link];
    opener = link;
    show(gallery.indexOf(link));
    if (!box.open) box.showModal();
  });
  document.addEventListener("keydown", function (event) {
    const box = document.getElementById("lightbox");
    if (!box || !box.open) return;
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      event.preventDefault();
      show(shown + (event.key === "ArrowRight" ? 1 : -1));
    }
  });
  document.addEventListener("close", function (event) {
    if (event.target.id === "lightbox" && opener && opener.isConnected) opener.focus();
  }, true);

  document.addEventListener("htmx:afterSwap", sync);
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.target.closest && event.target.closest(".attachment-remove")) sync();
  });
})();
