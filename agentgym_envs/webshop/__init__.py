"""WebShop-v0: a real web shop, driven over HTTP or through a real Chromium, with WebShop's reward.

* :mod:`~agentgym_envs.webshop.server`: the shop (aiohttp; search, results, item and sub-pages, buy),
  one session per episode; ``python -m agentgym_envs.webshop.server`` runs it on loopback.
* :class:`ShopServer` / :class:`ShopClient` (:mod:`~agentgym_envs.webshop.service`): start a server
  process, and talk to its JSON API (sessions, the purchase, products).
* :class:`HttpDriver` and :class:`~agentgym_envs.webshop.browser.BrowserDriver`: move an episode
  through the pages over HTTP or in Chromium (:class:`~agentgym_envs.webshop.browser.BrowserPool`,
  imported on use: Playwright is the ``web`` extra).
* :func:`parse_page` (:mod:`~agentgym_envs.webshop.pages`): a page as WebShop's ``text`` /
  ``text_rich`` observation and the elements it offers to click.
* :class:`WebShopEnv`: the environment.
"""

from agentgym_envs.webshop.drivers import HttpDriver, PageDriver
from agentgym_envs.webshop.env import WebShopEnv, available_actions, default_reward
from agentgym_envs.webshop.errors import ShopUnavailableError
from agentgym_envs.webshop.pages import Clickable, Form, Page, parse_page
from agentgym_envs.webshop.service import ShopClient, ShopServer

__all__ = [
    "Clickable",
    "Form",
    "HttpDriver",
    "Page",
    "PageDriver",
    "ShopClient",
    "ShopServer",
    "ShopUnavailableError",
    "WebShopEnv",
    "available_actions",
    "default_reward",
    "parse_page",
]
