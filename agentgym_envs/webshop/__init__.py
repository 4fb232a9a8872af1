"""WebShop-v0: a real web shop, driven over HTTP or through a real Chromium, with WebShop's reward.

* :mod:`~agentgym_envs.webshop.server`: the shop (aiohttp; search, results, item and sub-pages, buy),
  one session per episode; ``python -m agentgym_envs.webshop.server`` runs it on loopback.
* :class:`ShopServer` / :class:`ShopClient` (:mod:`~agentgym_envs.webshop.service`): start a server
  process, and talk to its JSON API (sessions, the purchase, products); :class:`ShopService` is what
  an env needs of a running shop (:class:`ShopAddress`: one someone else runs).
* :class:`~agentgym_envs.webshop.container.ShopContainer`: the server and its own Chromium in a Docker
  container with no network, reached over a Unix socket (imported on use).
* :class:`HttpDriver`, :class:`~agentgym_envs.webshop.browser.BrowserDriver` and :class:`RemoteBrowserDriver`:
  move an episode through the pages over HTTP, in Chromium (:class:`~agentgym_envs.webshop.browser.BrowserPool`,
  imported on use: Playwright is the ``web`` extra), or in the shop's own Chromium.
* :func:`parse_page` (:mod:`~agentgym_envs.webshop.pages`): a page as WebShop's ``text`` /
  ``text_rich`` observation and the elements it offers to click.
* :class:`WebShopEnv`: the environment.
"""

from agentgym_envs.lazy import lazy_exports

_EXPORTS = {
    "HttpDriver": "drivers",
    "PageDriver": "drivers",
    "RemoteBrowserDriver": "drivers",
    "WebShopEnv": "env",
    "available_actions": "env",
    "default_reward": "env",
    "ShopUnavailableError": "errors",
    "Clickable": "pages",
    "Form": "pages",
    "Page": "pages",
    "parse_page": "pages",
    "ShopAddress": "service",
    "ShopClient": "service",
    "ShopServer": "service",
    "ShopService": "service",
}
"""Each public name and the module it lives in (imported on first use)."""

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
