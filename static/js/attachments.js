// Attachments in the composer: the Attach button (on a phone, the system picker with the
// camera), pasting images or files from the clipboard, and dropping them anywhere on a thread's
// page. Each upload shows as a chip with a progress bar until the server answers with the
// file's chip (a thumbnail or an icon, the name, the size, a remove button) or a sentence
// saying why it was refused; the message box is never touched. Sent with the message.
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
    };
  }

  // With an attachment the text may be empty; the list hides when it holds nothing.
  function sync() {
    const p = parts();
    if (!p || !p.list) return;
    const attached = p.list.querySelector('input[name="attachments"]') !== null;
    if (p.text) p.text.required = !attached;
    p.list.hidden = p.list.children.length === 0;
  }

  function refusal(sentence) {
    const item = document.createElement("li");
    item.className = "attachment-refused";
    item.setAttribute("role", "alert");
    item.textContent = sentence;
    return item;
  }

  function upload(files) {
    const p = parts();
    if (!p || !p.list || !files.length) return;
    const data = new FormData();
    Array.from(files).forEach(function (file, index) {
      const name = file.name || "pasted-" + (index + 1) + "." + (file.type.split("/")[1] || "bin");
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
      upload(files);
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
  document.addEventListener("htmx:afterSwap", sync);
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.target.closest && event.target.closest(".attachment-remove")) sync();
  });
})();
