"""DataAnalysis-v0 end to end on the real backends: the contract, the prompt, the data in the sandbox, the python
tool, the sandbox's limits."""

from __future__ import annotations

import dataclasses
import json

import pytest
from gymnasium.utils.env_checker import check_env

from agentgym_envs.data_analysis import DataAnalysisEnv, default_reward, extract_query
from agentgym_envs.errors import EnvConfigError
from agentgym_envs.policies.base import answer_action, tool_call_action
from rewards import dabench_reward, data_analysis_reward, sql_result_reward
from tasks import Task

from .conftest import CITY_TOTALS_SQL, LIMITS, SECRET

SCRIPT = [
    tool_call_action("sql", query="SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY city"),
    tool_call_action("python", code="import pandas as pd\npd.read_csv('data/orders.csv').amount.describe()"),
    "no tool call here",
    tool_call_action("sql", query="SELECT * FROM missing_table"),
]


def play(env: DataAnalysisEnv, task: Task, actions: list[str]) -> list[str]:
    """The transcript of one episode: prompt, then each observation with its reward and flags."""
    observation, info = env.reset(seed=0, options={"task": task})
    transcript = [observation, json.dumps(info["tools"], sort_keys=True)]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        transcript.append(f"{observation}|{reward}|{terminated}|{truncated}")
    return transcript


def test_check_env_passes(env):
    check_env(env, skip_render_check=True)


def test_same_actions_give_the_same_episode(env, tasks):
    first = play(env, tasks[0], SCRIPT)
    assert first == play(env, tasks[0], SCRIPT)
    assert "Paris | 2" in first[2] and "count" in first[3] and "Catalog Error" in first[5]


def test_docker_and_bwrap_show_the_same_episode(tasks, backend_problems):
    from tests.conftest import require_backend

    require_backend("docker", backend_problems)
    require_backend("bwrap", backend_problems)
    transcripts = []
    for backend in ("docker", "bwrap"):
        env = DataAnalysisEnv(tasks=tasks, sandbox=backend, sandbox_limits=LIMITS)
        try:
            transcripts.append(play(env, tasks[0], SCRIPT))
        finally:
            env.close()
    assert transcripts[0] == transcripts[1]  # same wheels in the image as on the host: same tables, same pandas


def test_the_prompt_names_the_files_tables_columns_constraints_and_format(env, tasks):
    sql_task, field_task = tasks
    prompt, info = env.reset(options={"task": sql_task})
    assert [tool["function"]["name"] for tool in info["tools"]] == ["python", "sql"]
    for line in ("What is the total order amount per city?", "- data/orders.csv", "- data/shop.sqlite",
                 "table orders: order_id BIGINT, customer_id BIGINT, amount DOUBLE, day DATE",
                 "table customers: customer_id BIGINT, city VARCHAR", "table products: id BIGINT, name VARCHAR",
                 "table reviews: product_id BIGINT, stars BIGINT, text VARCHAR", "- Count every order once.",
                 "Format: A SQL query returning columns city, total", "one SQL query inside <answer>"):
        assert line in prompt
    assert CITY_TOTALS_SQL not in prompt and "15.5" not in prompt  # neither the answer nor the reference
    prompt, _ = env.reset(options={"task": field_task})
    assert "@mean_amount[value] where value" in prompt and "<answer>@name[value]" in prompt
    assert "data/shop.sqlite" not in prompt and "6.44" not in prompt


def test_only_the_named_files_are_in_the_sandbox_read_only(env, tasks):
    env.reset(options={"task": tasks[1]})  # names orders.csv only; the folder holds four files
    listing = ("import os\nprint(sorted(os.listdir('.')), sorted(os.listdir('data')), "
               "oct(os.stat('data').st_mode & 0o777), oct(os.stat('data/orders.csv').st_mode & 0o777))")
    observation, *_ = env.step(tool_call_action("python", code=listing))
    assert "['data', 'outputs'] ['orders.csv'] 0o555 0o444" in observation
    grep = ("import os\nhits = []\nfor top in ('/work', '/tmp'):\n"
            "    for root, _, names in os.walk(top):\n"
            "        for name in names:\n"
            "            data = open(os.path.join(root, name), 'rb').read()\n"
            f"            hits += [name for n in (b'{SECRET}', b'mean_amount[6', b'round(avg') if n in data]\n"
            "print('hits:', hits)")
    observation, *_ = env.step(tool_call_action("python", code=grep))
    assert "hits: []" in observation


def test_the_python_tool_reads_csv_parquet_and_sqlite(env, tasks):
    env.reset(options={"task": tasks[0]})
    code = ("import sqlite3, pandas as pd\n"
            "orders = pd.read_csv('data/orders.csv')\n"
            "customers = pd.read_parquet('data/customers.parquet')\n"
            "shop = sqlite3.connect('file:data/shop.sqlite?mode=ro', uri=True)\n"
            "products = pd.read_sql('SELECT * FROM products', shop)\n"
            "print(orders.amount.sum(), sorted(customers.city), products.price.max())")
    observation, _, _, _, info = env.step(tool_call_action("python", code=code))
    assert info["ok"] and "25.75 ['Paris', 'Paris', 'Rome'] 12.0" in observation


def test_scipy_sklearn_statsmodels_matplotlib_and_openpyxl_run_in_the_sandbox(da_backend, tasks):
    # their first import takes 3-7 s each on a busy machine: more than LIMITS' 5 s (the env's default is 30 s)
    env = DataAnalysisEnv(tasks=tasks, sandbox=da_backend, sandbox_limits=dataclasses.replace(LIMITS, timeout_s=60))
    env.reset(options={"task": tasks[1]})
    code = ("import pandas as pd, scipy.stats, sklearn.linear_model, statsmodels.formula.api as smf, openpyxl\n"
            "import matplotlib.pyplot as plt\n"
            "orders = pd.read_csv('data/orders.csv')\n"
            "test = scipy.stats.ttest_ind(orders.amount[:2], orders.amount[2:])\n"
            "slope = sklearn.linear_model.LinearRegression().fit(orders[['order_id']], orders.amount).coef_[0]\n"
            "ols = smf.ols('amount ~ order_id', data=orders).fit().params['order_id']\n"
            "orders.plot(x='order_id', y='amount'); plt.savefig('outputs/amount.png')\n"
            "orders.to_excel('outputs/orders.xlsx', index=False)\n"
            "print(f'p={test.pvalue:.4f} slope={slope:.4f} ols={ols:.4f} backend={plt.get_backend().lower()}', "
            "pd.read_excel('outputs/orders.xlsx').shape, sorted(__import__('os').listdir('outputs')))")
    observation, _, _, _, info = env.step(tool_call_action("python", code=code))
    env.close()
    # by hand: pooled t of [5.5, 3.0] vs [10.25, 7.0] is -4.375 / sqrt(4.203125) = -2.134 on 2 degrees of freedom,
    # p = 0.1664; the least-squares slope of amount on order_id is 1.175
    assert info["ok"], observation
    assert "p=0.1664 slope=1.1750 ols=1.1750 backend=agg (4, 4) ['amount.png', 'orders.xlsx']" in observation


def test_outputs_is_writable_and_limited_by_the_disk_size(env, tasks):
    env.reset(options={"task": tasks[1]})
    code = f"open('outputs/big.bin', 'wb').write(b'x' * {LIMITS.disk_mb + 1} * 2**20)"
    observation, _, _, _, info = env.step(tool_call_action("python", code=code))
    assert not info["ok"] and not info["infra_error"] and "No space left on device" in observation


def test_a_field_question_is_graded_on_the_answer_fields(env, tasks):
    env.reset(options={"task": tasks[1]})
    observation, *_ = env.step(tool_call_action("python", code=tasks[1].metadata["reference"]["pandas"]))
    assert "@mean_amount[6.44]" in observation
    _, reward, terminated, _, info = env.step(answer_action("@mean_amount[6.44]"))
    assert (reward, terminated) == (1.0, True) and info["reward_components"]["tool_use/right_tool"] > 0
    env.reset(options={"task": tasks[1]})
    _, reward, *_ = env.step(answer_action("@mean_amount[6.45]"))
    assert reward == 0.0


def test_the_memory_limit_holds_and_the_tools_still_work(env, tasks):
    env.reset(options={"task": tasks[0]})
    observation, _, _, truncated, info = env.step(tool_call_action("python", code="x = bytearray(3 << 30)"))
    assert not info["ok"] and not info["infra_error"] and not truncated
    assert "memory" in observation.lower()
    observation, _, _, _, info = env.step(tool_call_action("sql", query="SELECT count(*) AS n FROM orders"))
    assert info["ok"] and "n\n-\n4\n(1 row)" in observation


def test_a_kernel_restart_brings_the_data_back(env, tasks):
    env.reset(options={"task": tasks[0]})
    observation, _, _, _, info = env.step(tool_call_action("python", code="import os\nos._exit(3)"))
    assert not info["ok"] and "loaded again" in observation
    observation, *_ = env.step(tool_call_action("python", code="import os\nprint(sorted(os.listdir('data')))"))
    assert "['customers.parquet', 'orders.csv', 'shop.sqlite']" in observation


def test_output_is_capped(env, tasks):
    env.reset(options={"task": tasks[0]})
    observation, *_ = env.step(tool_call_action("python", code="print('x' * 100_000)"))
    assert "bytes of output cut" in observation and len(observation) < 2 * LIMITS.output_bytes


def test_rewards_per_family_and_shaping_terms_at_weight_zero():
    sql, fields = default_reward("sql"), default_reward("filtering")
    assert [(term.name, term.weight) for term in sql.terms] == [("outcome", 1.0), ("format", 0.0), ("tool_use", 0.0)]
    assert sql.terms[0].fn is sql_result_reward and fields.terms[0].fn is data_analysis_reward


def test_the_dabench_grader_grades_the_fields_and_an_unknown_grader_is_refused(tasks):
    sql, fields = default_reward("sql", "dabench"), default_reward("filtering", "dabench")
    assert sql.terms[0].fn is sql_result_reward and fields.terms[0].fn is dabench_reward
    with pytest.raises(EnvConfigError, match=r"grader: expected one of \['dabench', 'forgiving'\], got 'exact'"):
        DataAnalysisEnv(tasks=tasks, grader="exact")


def test_a_pool_of_another_image_is_refused(tasks, backend_problems):
    from agentgym_envs.sandbox.docker import DockerSandboxPool
    from tests.conftest import require_backend

    require_backend("docker", backend_problems)
    with DockerSandboxPool(size=0, limits=LIMITS) as pool:
        env = DataAnalysisEnv(tasks=tasks, sandbox_pool=pool)
        with pytest.raises(EnvConfigError, match="DockerSandboxPool"):
            env.reset(seed=0)
        env.close()


@pytest.mark.parametrize(("answer", "query"), [
    ("SELECT 1", "SELECT 1"),
    ("```sql\nSELECT 2;\n```", "SELECT 2;"),
    ("Here it is:\n```\nSELECT 3\n```\nthanks", "SELECT 3"),
    ("  ", ""),
])
def test_extract_query(answer, query):
    assert extract_query(answer) == query
