import { createRequire } from 'node:module';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalService } from '../local/runner';
import { startDemoService } from './support/demo-service';
import {
  addVirtualAuthenticator,
  button,
  clickAndWait,
  launchChromium,
  link,
  openTab,
  signInOnPage,
} from './support/chromium';

// Every page a person sees, at a phone's width (390 px) and a desktop's (1280 px), checked with
// axe-core in a real Chromium: no violation at all, best practices included. Also what axe does
// not measure: the focus ring's contrast against what surrounds it (WCAG 1.4.11), the card's
// side margins, one heading scale, the form controls' font.

const axeSource = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

let service: LocalService;
let dataDir: string;
let chromium: Browser;
let counter = 0;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'svcnum-axe-'));
  let started: { service: LocalService };
  [started, chromium] = await Promise.all([startDemoService(dataDir), launchChromium()]);
  ({ service } = started);
});
afterAll(async () => {
  await chromium?.close();
  await service?.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** The card's text with its line breaks as spaces, as it reads. */
const mainText = async (page: Page) =>
  (await page.$eval('main', (element) => element.textContent ?? '')).replace(/\s+/g, ' ');

/** axe-core's violations on the page as it is now: rule id and the elements it names. */
async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: axeSource });
  const violations = (await page.evaluate(`axe.run(document).then((result) => result.violations)`)) as Array<{
    id: string;
    nodes: Array<{ target: string[] }>;
  }>;
  return violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target).join(', ')}`);
}

/** Layout facts axe does not check: side margins, h2 not larger than h1, controls in the page's font. */
async function layoutFacts(page: Page) {
  return (await page.evaluate(`(() => {
    const size = (selector) => [...document.querySelectorAll(selector)].map((e) => parseFloat(getComputedStyle(e).fontSize));
    const main = document.querySelector('main').getBoundingClientRect();
    const bodyFont = getComputedStyle(document.body).fontFamily;
    return {
      left: main.left,
      right: document.documentElement.clientWidth - main.right,
      h1: Math.min(...size('h1')),
      h2: Math.max(0, ...size('h2, h3')),
      fonts: [...document.querySelectorAll('input:not([type=hidden]), button')]
        .map((e) => getComputedStyle(e).fontFamily)
        .filter((font) => font !== bodyFont),
    };
  })()`)) as { left: number; right: number; h1: number; h2: number; fonts: string[] };
}

async function checkPage(page: Page, name: string, pages: string[]) {
  pages.push(name);
  expect(await axeViolations(page), `axe on ${name}`).toEqual([]);
  const facts = await layoutFacts(page);
  expect(Math.min(facts.left, facts.right), `side margins on ${name}`).toBeGreaterThanOrEqual(8);
  expect(facts.h2, `heading scale on ${name}`).toBeLessThanOrEqual(facts.h1);
  expect(facts.fonts, `control fonts on ${name}`).toEqual([]);
}

const channel = (value: number) => {
  const c = value / 255;
  return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
};
const luminance = (rgb: number[]) => 0.2126 * channel(rgb[0]!) + 0.7152 * channel(rgb[1]!) + 0.0722 * channel(rgb[2]!);
const rgb = (css: string) => (css.match(/[\d.]+/g) ?? []).slice(0, 3).map(Number);
const contrast = (one: string, other: string) => {
  const [light, dark] = [luminance(rgb(one)), luminance(rgb(other))].sort((a, b) => b - a);
  return (light! + 0.05) / (dark! + 0.05);
};

/**
 * Tabs to the first focusable element and measures its ring: the outline colour against the first
 * opaque background behind it (the ring sits outside the element, so its parent's background).
 */
async function focusRingContrast(page: Page): Promise<{ element: string; ratio: number }> {
  await page.keyboard.press('Tab');
  const colours = (await page.evaluate(`(() => {
    const focused = document.activeElement;
    const style = getComputedStyle(focused);
    let behind = focused.parentElement;
    while (behind && /rgba\\(.*, 0\\)|transparent/.test(getComputedStyle(behind).backgroundColor)) behind = behind.parentElement;
    return {
      element: focused.tagName + ' ' + (focused.textContent || focused.id).trim(),
      outline: style.outlineStyle === 'none' ? '' : style.outlineColor,
      background: behind ? getComputedStyle(behind).backgroundColor : 'rgb(255, 255, 255)',
    };
  })()`)) as { element: string; outline: string; background: string };
  expect(colours.outline, `a focus ring on ${colours.element}`).not.toBe('');
  return { element: colours.element, ratio: contrast(colours.outline, colours.background) };
}

describe.each([390, 1280])('pages at %i px', (width) => {
  it('every page passes axe-core with no violation; the focus ring has at least 3:1 contrast', async () => {
    const tab = await openTab(chromium);
    const { page } = tab;
    const pages: string[] = [];
    try {
      // axe is added as a script tag: our CSP (rightly) refuses it, so this tab alone ignores the CSP.
      await page.setBypassCSP(true);
      await page.setViewport({ width, height: 800 });
      const login = { email: `axe${++counter}-${width}@example.com`, password: 'correct horse battery staple' };
      await service.core.registration.createUser(login);

      await page.goto(`${service.issuer}/login`);
      await checkPage(page, 'sign-in', pages);
      const ring = await focusRingContrast(page);
      expect(ring.ratio, `focus ring of ${ring.element}`).toBeGreaterThanOrEqual(3);
      await signInOnPage(page, { ...login, password: 'not the password' });
      await checkPage(page, 'sign-in error', pages);

      // Consent names the account as it was typed; "Not you?" leads to the sign-in of the same request.
      const someoneElse = { ...login, email: `other-${login.email}` };
      await service.core.registration.createUser(someoneElse);
      await page.goto(`${service.issuer}/demo`);
      await signInOnPage(page, someoneElse);
      expect(new URL(page.url()).pathname).toBe('/consent');
      expect(await mainText(page)).toContain(`Signed in as ${someoneElse.email}. Not you? Sign in as someone else`);
      await clickAndWait(page, link('Sign in as someone else'));
      await signInOnPage(page, login);
      expect(new URL(page.url()).pathname).toBe('/consent');
      expect(await mainText(page)).toContain(`Signed in as ${login.email}.`);
      await checkPage(page, 'consent', pages);
      await clickAndWait(page, button('Allow'));
      expect(new URL(page.url()).pathname).toBe('/demo/callback');
      await checkPage(page, 'demo', pages);
      // The token response points at the claims where they are: above it.
      expect(await page.$eval('#tokens + pre', (element) => element.textContent)).toContain('decoded above');

      await page.goto(`${service.issuer}/account`);
      await checkPage(page, 'account', pages);
      const accountRing = await focusRingContrast(page);
      expect(accountRing.ratio, `focus ring of ${accountRing.element}`).toBeGreaterThanOrEqual(3);
      // A red outlined link: text and border the same red, not the primary button's blue border.
      const revoke = await page.evaluate(`(() => {
        const style = getComputedStyle(document.querySelector('a[aria-label="Revoke access for Demo app"]'));
        return [style.color, style.borderTopColor, style.backgroundColor];
      })()`);
      expect(revoke).toEqual(['rgb(165, 14, 14)', 'rgb(165, 14, 14)', 'rgb(255, 255, 255)']);
      await clickAndWait(page, link('Revoke access for Demo app'));
      await checkPage(page, 'revoke confirmation', pages);
      await clickAndWait(page, button('Revoke access'));
      expect(await page.$eval('[role="status"]', (element) => element.textContent)).toBe(
        'Access removed for Demo app.',
      );
      await checkPage(page, 'account after revoking', pages);

      // Passkeys, with a virtual authenticator in this tab: the account with one, rename, remove, the password step.
      await addVirtualAuthenticator(page);
      await clickAndWait(page, button('Add a passkey'));
      expect(await mainText(page)).toContain('Passkey added.');
      await checkPage(page, 'account with a passkey', pages);
      await clickAndWait(page, link('Rename Passkey 1'));
      await checkPage(page, 'rename a passkey', pages);
      await page.goto(`${service.issuer}/account`);
      await clickAndWait(page, link('Remove Passkey 1'));
      await checkPage(page, 'remove a passkey', pages);
      await page.goto(`${service.issuer}/account/passkeys/confirm`);
      await checkPage(page, 'password before adding a passkey', pages);

      await page.goto(`${service.issuer}/oauth/authorize?client_id=not-a-client&response_type=code`);
      expect(await page.$eval('h1', (element) => element.textContent)).toBe('This sign-in link is not valid');
      expect(await page.$$(link('Go to your account'))).toHaveLength(1);
      await checkPage(page, 'error page', pages);

      // RP-Initiated Logout's question (here opened by hand), and a sign-out link that cannot be used.
      await page.goto(`${service.issuer}/logout`);
      expect(await page.$eval('h1', (element) => element.textContent)).toBe('Sign out of your account?');
      await checkPage(page, 'sign-out question', pages);
      await page.goto(`${service.issuer}/logout?client_id=not-a-client`);
      expect(await page.$eval('h1', (element) => element.textContent)).toBe('This sign-out link cannot be used');
      await checkPage(page, 'sign-out error page', pages);

      await page.goto(`${service.issuer}/account`);
      await clickAndWait(page, button('Sign out'));
      await checkPage(page, 'signed out', pages);
    } finally {
      await tab.context.close();
    }
    expect(pages).toHaveLength(15);
    expect(tab.problems.list(), 'console errors or failed requests').toEqual([]);
  });
});
