// The pages' one script, served as /assets/passkeys.js (same origin: the CSP allows `script-src
// 'self'` on the sign-in and account pages only, no inline script). It asks us for WebAuthn
// options, calls the browser's WebAuthn API and posts the answer in the page's own form, so the
// server answers as it does any form post (redirects, cookies, error pages). WebAuthn Level 3's
// JSON methods (parse…OptionsFromJSON, toJSON: every current engine) do the encoding; a browser
// without them keeps the password form and loses only the passkey buttons.

export const passkeysScript = `'use strict';
(() => {
  const P = window.PublicKeyCredential;
  const ok = typeof P === 'function' && P.parseRequestOptionsFromJSON && P.parseCreationOptionsFromJSON;
  const say = (text) => {
    const alert = document.getElementById('passkey-error');
    alert.textContent = text;
    alert.hidden = false;
  };
  const options = async (path, form) => {
    const body = new URLSearchParams({ csrf: form.elements.csrf.value });
    const answer = await fetch(path, { method: 'POST', body });
    if (!answer.ok) throw new Error('refused');
    return answer.json();
  };
  const post = (form, field, credential) => {
    form.elements[field].value = JSON.stringify(credential.toJSON());
    form.submit();
  };
  const signIn = document.querySelector('form[action="/login"]');
  const button = document.getElementById('passkey-sign-in');
  const add = document.querySelector('form[action="/account/passkeys"]');
  for (const hidden of [button, add]) if (hidden && !ok) hidden.hidden = true;
  if (!ok) return;
  if (signIn) {
    let pending;
    const get = async (mediation) => {
      if (pending) pending.abort();
      pending = new AbortController();
      const { signal } = pending;
      const publicKey = P.parseRequestOptionsFromJSON(await options('/login/passkey', signIn));
      post(signIn, 'passkey', await navigator.credentials.get({ mediation, signal, publicKey }));
    };
    const failed = (error) =>
      error.name === 'AbortError' || say('Signing in with a passkey did not work. Try again, or use your password.');
    button.addEventListener('click', () => get('optional').catch(failed));
    if (P.isConditionalMediationAvailable) {
      P.isConditionalMediationAvailable().then((available) => available && get('conditional').catch(() => 0));
    }
  }
  if (add) {
    add.addEventListener('submit', async (event) => {
      event.preventDefault();
      try {
        const publicKey = P.parseCreationOptionsFromJSON(await options('/account/passkeys/options', add));
        post(add, 'credential', await navigator.credentials.create({ publicKey }));
      } catch (error) {
        const known = error.name === 'InvalidStateError';
        say(known ? 'This passkey is on your account already.' : 'The passkey was not added. Try again.');
      }
    });
  }
})();
`;
