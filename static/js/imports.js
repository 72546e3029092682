// The Import page sends a file in pieces: no request carries more than a piece of a big
// export, the bar shows the upload, and a piece that fails is sent again from where the
// server says the file stops. Without this script the form posts the file whole.
(function () {
  "use strict";
  const form = document.getElementById("import-form");
  if (!form || !window.fetch || !window.File || !File.prototype.slice) return;
  const input = form.querySelector('input[type="file"]');
  const token = form.querySelector('[name="csrfmiddlewaretoken"]').value;
  const bar = document.getElementById("import-upload-progress");
  const status = document.getElementById("import-upload-status");
  const button = form.querySelector('button[type="submit"]');

  function say(text, failed) {
    status.textContent = text;
    status.classList.toggle("form-error", Boolean(failed));
  }

  async function send(url, body, headers) {
    const response = await fetch(url, {method: "POST", body: body, credentials: "same-origin",
                                       headers: Object.assign({"X-CSRFToken": token}, headers || {})});
    let data = {};
    try { data = await response.json(); } catch (error) { data = {detail: response.statusText}; }
    return {ok: response.ok, status: response.status, data: data};
  }

  form.addEventListener("submit", async function (event) {
    const file = input.files && input.files[0];
    if (!file) return;  // the server says what is missing
    event.preventDefault();
    button.disabled = true;
    form.querySelector(".import-upload").hidden = false;
    bar.max = Math.max(file.size, 1);
    const begin = new FormData();
    begin.append("name", file.name);
    begin.append("size", String(file.size));
    let reply = await send(form.dataset.begin, begin);
    if (!reply.ok) { say(reply.data.detail, true); button.disabled = false; return; }
    let state = reply.data, failures = 0;
    while (state.received < state.size) {
      const piece = file.slice(state.received, state.received + state.piece_bytes);
      say("Uploading… " + Math.round(100 * state.received / state.size) + "%");
      try {
        reply = await send(state.piece_url + "?offset=" + state.received, piece,
                           {"Content-Type": "application/octet-stream"});
      } catch (error) {
        reply = {ok: false, status: 0, data: {detail: "The connection dropped."}};
      }
      if (reply.ok || reply.status === 409) {
        state = Object.assign(state, reply.data);
        failures = 0;
      } else if (reply.status === 0 || reply.status >= 500) {
        if (++failures > 5) { say(reply.data.detail + " Try again.", true); button.disabled = false; return; }
        await new Promise(function (done) { setTimeout(done, 1000 * failures); });
      } else {
        say(reply.data.detail, true); button.disabled = false; return;
      }
      bar.value = state.received;
    }
    say("Uploaded: reading the file…");
    window.location.assign(state.page);
  });
})();
