import chromium from '@sparticuz/chromium';
import puppeteer, { type Browser, type BrowserContext, type Page } from 'puppeteer-core';

// A real Chromium for the page tests. @sparticuz/chromium ships a headless Chromium inside its
// npm package (unpacked into /tmp on first use), so `npm install && npm test` is enough on a fresh
// machine; CHROMIUM_PATH points at a system browser instead (e.g. Debian's /usr/bin/chromium).

/**
 * Only what a headless browser needs on this machine (root, no GPU, no network). Never
 * `chromium.args`: they include --disable-web-security and --allow-running-insecure-content,
 * which would hide the very CSP, CORS and Origin behaviour the tests are about.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

export async function launchChromium(): Promise<Browser> {
  const system = process.env.CHROMIUM_PATH;
  return puppeteer.launch({
    executablePath: system || (await chromium.executablePath()),
    // The packaged build is chrome-headless-shell; a full Chromium runs the new headless mode.
    headless: system ? true : 'shell',
    args: FLAGS,
  });
}

/**
 * What a person would see go wrong in the console: errors and warnings (a CSP violation is one),
 * uncaught page errors, failed requests and refused subresources (a missing favicon, say). A main
 * document may answer 4xx on purpose (a refused form, a wrong password: the tests check those
 * statuses), so the console line Chromium logs for it is not counted.
 */
export function watchProblems(page: Page): { list(): string[]; clear(): void } {
  let problems: string[] = [];
  const documents = new Set<string>();
  page.on('console', (message) => {
    if (message.type() !== 'error' && message.type() !== 'warn') return;
    const url = message.location().url ?? page.url();
    const status = /^Failed to load resource: the server responded with a status of (\d+)/.exec(message.text())?.[1];
    // Checked when read: the console line may come before or after the response event.
    problems.push(status ? `\0${status} ${url}` : `console ${message.type()}: ${message.text()} (${url})`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${String(error)}`));
  page.on('requestfailed', (request) =>
    problems.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`),
  );
  page.on('response', (response) => {
    const document = response.request().resourceType() === 'document';
    if (document) documents.add(`${response.status()} ${response.url()}`);
    else if (response.status() >= 400) problems.push(`${response.status()} for ${response.url()}`);
  });
  return {
    list: () =>
      problems
        .filter((problem) => !(problem.startsWith('\0') && documents.has(problem.slice(1))))
        .map((problem) => (problem.startsWith('\0') ? `console error: ${problem.slice(1)}` : problem)),
    clear: () => {
      problems = [];
    },
  };
}

export interface Tab {
  context: BrowserContext;
  page: Page;
  problems: ReturnType<typeof watchProblems>;
}

/** A fresh incognito context (no cookies from other tests) with one watched page. */
export async function openTab(browser: Browser): Promise<Tab> {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  return { context, page, problems: watchProblems(page) };
}

/** Clicks what `selector` finds and waits for the page it leads to. */
export async function clickAndWait(page: Page, selector: string) {
  const [response] = await Promise.all([page.waitForNavigation(), page.locator(selector).click()]);
  return response;
}

/** Types into the field with this label (the page's accessible name for it). */
export async function fillLabelled(page: Page, label: string, value: string) {
  await page.locator(`::-p-aria([name="${label}"][role="textbox"])`).fill(value);
}

export interface SentForm {
  url: string;
  headers: Record<string, string>;
}

/**
 * The headers Chromium really sent with each form post of this page, as the network stack
 * reports them over CDP (observed, nothing intercepted or rewritten).
 */
export async function watchFormPosts(page: Page): Promise<() => SentForm[]> {
  const session = await page.createCDPSession();
  const urls = new Map<string, string>();
  const sent: Array<{ requestId: string; headers: Record<string, string> }> = [];
  session.on('Network.requestWillBeSent', (event) => {
    if (event.request.method === 'POST') urls.set(event.requestId, event.request.url);
  });
  session.on('Network.requestWillBeSentExtraInfo', (event) => {
    const headers = Object.fromEntries(
      Object.entries(event.headers).map(([name, value]) => [name.toLowerCase(), String(value)]),
    );
    // A redirect after the post reuses its request id; only the post itself has a form body.
    if (headers['content-type'] === 'application/x-www-form-urlencoded')
      sent.push({ requestId: event.requestId, headers });
  });
  await session.send('Network.enable');
  return () => sent.map(({ requestId, headers }) => ({ url: urls.get(requestId) ?? '?', headers }));
}

/**
 * A platform passkey provider in this tab (CDP WebAuthn): CTAP2, built in, discoverable credentials,
 * user verification that always succeeds, presence given without a touch.
 */
export async function addVirtualAuthenticator(page: Page) {
  const cdp = await page.createCDPSession();
  await cdp.send('WebAuthn.enable', { enableUI: false });
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
}

/** Selectors by accessible role and name, as assistive technology (and a person) finds things. */
export const button = (name: string) => `::-p-aria([name="${name}"][role="button"])`;
export const link = (name: string) => `::-p-aria([name="${name}"][role="link"])`;

/** Fills in the sign-in form by its labels and presses "Sign in". */
export async function signInOnPage(page: Page, login: { email: string; password: string }) {
  await fillLabelled(page, 'Number or email', login.email);
  await fillLabelled(page, 'Password', login.password);
  return clickAndWait(page, button('Sign in'));
}
