"""The synthetic memories and queries the benchmarks send: varied Chinese, English and mixed texts, seeded.

Fixed seeds, so two runs (and two benchmarks) write and ask the same things; what a benchmark does
with them (how many, which tenant, which phase) stays in the benchmark.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

# ---------------------------------------------------------------- templated memories and questions

_ZH_NAMES = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨帆", "赵磊", "黄敏", "周杰", "吴婷", "徐鹏", "孙悦"]
_EN_NAMES = ["Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Iris", "Jack", "Kate", "Leo"]
_CITIES_ZH = ["上海", "杭州", "北京", "深圳", "成都", "南京", "苏州", "武汉", "西安", "广州", "厦门", "青岛"]
_CITIES_EN = ["Shanghai", "Hangzhou", "Berlin", "London", "Tokyo", "Singapore", "Paris", "Seattle", "Toronto", "Sydney"]
_PROJECTS = ["Apollo", "Hermes", "Orion", "Atlas", "Nova", "Phoenix", "Zephyr", "Titan", "Vega", "Lynx", "Kepler"]
_TOPICS_ZH = ["周报", "季度预算", "用户调研", "发布计划", "数据迁移", "性能优化", "招聘面试", "客户回访", "合同审批",
              "安全审计", "成本分析", "培训材料", "竞品分析", "产品路线图", "服务器扩容", "报销流程"]
_TOPICS_EN = ["weekly report", "quarterly budget", "user research", "release plan", "data migration",
              "performance tuning", "hiring interviews", "customer follow-up", "contract review", "security audit",
              "cost analysis", "training material", "competitor analysis", "product roadmap", "on-call rotation"]
_FOODS_ZH = ["火锅", "寿司", "咖啡", "奶茶", "川菜", "粤菜", "拉面", "素食", "烧烤", "饺子"]
_FOODS_EN = ["ramen", "espresso", "green tea", "vegetarian food", "sushi", "tacos", "dim sum", "pasta",
             "oat milk latte"]
_TOOLS = ["Excel", "Notion", "Jira", "Slack", "飞书", "钉钉", "Figma", "VS Code", "PostgreSQL", "Grafana", "Tableau"]
_FORMATS_ZH = ["表格", "要点列表", "纯文本", "Markdown", "图表", "一页纸摘要"]
_DAYS_ZH = ["周一", "周二", "周三", "周四", "周五", "周末"]
_DAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "weekend"]

_TEMPLATES: list[Callable[[random.Random], str]] = [
    lambda r: f"用户住在{r.choice(_CITIES_ZH)}，每天坐地铁通勤大约{r.randint(20, 90)}分钟",
    lambda r: f"用户偏好{r.choice(_TOPICS_ZH)}用{r.choice(_FORMATS_ZH)}呈现，不要超过{r.randint(1, 5)}页",
    lambda r: (f"{r.choice(_ZH_NAMES)}负责{r.choice(_PROJECTS)}项目的{r.choice(_TOPICS_ZH)}，"
               f"截止日期是{r.randint(1, 12)}月{r.randint(1, 28)}日"),
    lambda r: f"用户喜欢吃{r.choice(_FOODS_ZH)}，对{r.choice(['花生', '海鲜', '乳糖', '麸质', '芒果'])}过敏",
    lambda r: f"每{r.choice(_DAYS_ZH)}上午{r.randint(8, 11)}点和{r.choice(_ZH_NAMES)}开{r.choice(_TOPICS_ZH)}例会",
    lambda r: (f"用户上个月从{r.choice(_CITIES_ZH)}搬到了{r.choice(_CITIES_ZH)}，"
               f"新公司在{r.choice(['滨江', '浦东', '南山', '朝阳', '高新区'])}"),
    lambda r: (f"{r.choice(_PROJECTS)}项目的{r.choice(_TOPICS_ZH)}预算是{r.randint(5, 500)}万元，"
               f"需要{r.choice(_ZH_NAMES)}审批"),
    lambda r: f"用户习惯用{r.choice(_TOOLS)}整理{r.choice(_TOPICS_ZH)}，讨厌冗长的邮件",
    lambda r: (f"The user lives in {r.choice(_CITIES_EN)} "
               f"and commutes by {r.choice(['bike', 'train', 'car', 'bus'])} every day"),
    lambda r: (f"The user prefers the {r.choice(_TOPICS_EN)} "
               f"as a {r.choice(['table', 'bullet list', 'short memo', 'chart'])}, at most {r.randint(1, 5)} pages"),
    lambda r: (f"{r.choice(_EN_NAMES)} owns the {r.choice(_TOPICS_EN)} "
               f"for project {r.choice(_PROJECTS)}, due on {r.choice(_DAYS_EN)}"),
    lambda r: (f"The user is allergic to {r.choice(['peanuts', 'shellfish', 'lactose', 'gluten'])} "
               f"and loves {r.choice(_FOODS_EN)}"),
    lambda r: (f"{r.choice(_EN_NAMES)} reviews the {r.choice(_TOPICS_EN)} "
               f"every {r.choice(_DAYS_EN)} at {r.randint(8, 17)}:00"),
    lambda r: (f"The {r.choice(_TOPICS_EN)} budget for {r.choice(_PROJECTS)} is {r.randint(10, 900)}k USD, "
               f"approved by {r.choice(_EN_NAMES)}"),
    lambda r: (f"The user switched from {r.choice(_TOOLS)} to {r.choice(_TOOLS)} "
               f"for the {r.choice(_TOPICS_EN)} last {r.choice(['week', 'month', 'quarter'])}"),
    lambda r: f"用户的{r.choice(_PROJECTS)} project 每周用 {r.choice(_TOOLS)} 写 {r.choice(_TOPICS_EN)}",
    lambda r: f"{r.choice(_EN_NAMES)} 说 {r.choice(_TOPICS_ZH)} 的 deadline 改到 {r.choice(_DAYS_EN)} 了",
    lambda r: f"用户在 {r.choice(_CITIES_EN)} 出差期间喜欢喝 {r.choice(_FOODS_EN)}，会议安排在{r.choice(_DAYS_ZH)}",
    lambda r: (f"{r.choice(_PROJECTS)} 的 {r.choice(_TOPICS_EN)} 由{r.choice(_ZH_NAMES)}负责，"
               f"用 {r.choice(_TOOLS)} 跟踪进度"),
    lambda r: f"Remember: {r.choice(_ZH_NAMES)} prefers {r.choice(_FORMATS_ZH)} for the {r.choice(_TOPICS_EN)}",
]
CATEGORIES = ["PROFILE", "PREFERENCE", "ENTITY", "EVENT"]

QUESTIONS = [
    "用户住在哪个城市？", "我现在住在哪里", "周报应该用什么格式", "我对什么食物过敏", "每周的例会是什么时候",
    "Apollo项目的预算是多少", "谁负责数据迁移", "用户最近搬家了吗", "我喜欢吃什么", "用户用什么工具整理周报",
    "杭州的新公司在哪个区", "合同审批需要谁同意", "性能优化的截止日期", "季度预算需要谁审批", "我通勤要多久",
    "Where does the user live?", "How should I format the weekly report?", "What is the user allergic to?",
    "Who owns the release plan for Orion?", "When is the security audit review?", "What is the budget for Nova?",
    "Which tool does the user use now?", "How does the user commute?", "What food does the user like?",
    "who approved the quarterly budget", "what changed about the data migration deadline",
    "Orion 项目的 weekly report 谁负责", "用户出差时喜欢喝什么 coffee", "Phoenix 的 deadline 是哪天",
    "用 Jira 跟踪的 project 有哪些", "Alice 负责哪个项目", "上海 commute 多久", "Kepler budget 多少万元",
    "What did Grace say about the 周报?", "用户 prefers 什么 format", "security audit 的负责人是谁",
]


def base_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct, varied memory texts (zh / en / mixed), deterministic for a seed."""
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen.setdefault(rng.choice(_TEMPLATES)(rng), None)
    return list(seen)


def questions(n: int, seed: int = 11) -> list[str]:
    """``n`` query strings cycling over the realistic questions (shuffled, deterministic)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        batch = QUESTIONS[:]
        rng.shuffle(batch)
        out.extend(batch)
    return out[:n]


# ---------------------------------------------------------------- short notes and abusive queries (bench/load.py)

WORDS = ["上海", "北京", "咖啡", "周报", "项目", "budget", "meeting", "travel", "猫", "morning", "report", "客户"]
CJK = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 2_000))
"""2,000 distinct CJK characters: the text of a recall as long as the API accepts, with no repeated word."""


def short_note(rng: random.Random) -> str:
    """A short mixed note (three common words and a number): a memory's content or a plain recall."""
    return f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randrange(10_000)} 备注 {rng.choice(WORDS)}"


def long_cjk_query(rng: random.Random) -> str:
    """A 2,000-character CJK recall starting at a random place of :data:`CJK`: an abusive tenant's query."""
    start = rng.randrange(len(CJK) // 2)
    return (CJK[start:] + CJK)[:2_000]


# ---------------------------------------------------------------- embedding texts (bench/embedder_isolation.py)

EMBEDDING_QUERIES = [
    "how much protein per day", "我住在哪里", "what did Caroline say about the adoption agency last summer",
    "上个月的销售报告什么时候发布", "wifi password", "Melanie's kids and their favourite camping trip by the lake",
]


def embedding_passages(n: int = 64) -> list[str]:
    """``n`` passages of a little more than a query's length, built from :data:`EMBEDDING_QUERIES`."""
    return [f"{q} — memory text number {i}, with a little more context to embed" for i, q in
            enumerate(EMBEDDING_QUERIES * (n // len(EMBEDDING_QUERIES) + 1))][:n]


# ---------------------------------------------------------------- request bodies

CAPTURED_AT = "2026-06-01T09:00:00Z"


def candidate(content: str, source_id: str, *, source_type: str = "EXPLICIT_USER_STATEMENT",
              captured_at: str = CAPTURED_AT, category: str = "PROFILE", **fields: Any) -> dict[str, Any]:
    """A ``POST /memory-candidates`` body: a USER memory with evidence E2 (ACTIVE at once for a memory writer)."""
    return {"category": category, "space": "USER", "content": content, "source_level": "E2",
            "source": {"source_id": source_id, "source_type": source_type, "captured_at": captured_at}, **fields}


def random_candidate(rng: random.Random) -> dict[str, Any]:
    """A :func:`short_note` as a user's statement with a fresh source id."""
    return candidate(short_note(rng), f"chat-{uuid.uuid4().hex[:8]}")
