"""The page's words for errors, in English and Chinese: i18n.MESSAGES takes them in.

problem.<code>: a keyed error (memoryd/errors.py); the English is the API's own sentence
(ERROR_TEXTS), so the English page says what the API says. invalid.<kind>: what a
validation error says after the field's name, by pydantic's error type (page/wording.py
maps each type to its kind)."""

from __future__ import annotations

from memoryd.errors import ERROR_TEXTS

ERROR_WORDS: dict[str, dict[str, str]] = {
    "en": {
        **{f"problem.{code}": text for code, text in ERROR_TEXTS.items()},
        "error.with_detail": "{what}: {detail}",
        "invalid.field": "{field}: {mistake}",
        "invalid.and": "; ",
        "invalid.comma": ", ",
        "invalid.or": " or ",
        "invalid.empty": "must not be empty",
        "invalid.other": "is not valid",
        "invalid.missing": "is required",
        "invalid.text": "must be text",
        "invalid.text_too_short": "needs at least {min_length} characters",
        "invalid.text_too_long": "takes at most {max_length} characters",
        "invalid.pattern": "does not have the form {pattern}",
        "invalid.whole_number": "must be a whole number",
        "invalid.number": "must be a number",
        "invalid.finite": "must be a finite number",
        "invalid.yes_no": "must be yes or no",
        "invalid.gt": "must be more than {gt}",
        "invalid.ge": "must be {ge} or more",
        "invalid.lt": "must be less than {lt}",
        "invalid.le": "must be {le} or less",
        "invalid.one_of": "must be one of {expected}",
        "invalid.date": "must be a date such as 2026-03-01",
        "invalid.datetime": "must be a date and time such as 2026-03-01T09:00:00Z",
        "invalid.too_few": "needs at least {min_length} items",
        "invalid.too_many": "takes at most {max_length} items",
        "invalid.list": "must be a list",
        "invalid.object": "must be an object",
        "invalid.unknown_field": "is not a field here",
    },
    "zh": {
        "problem.memory.missing": "没有编号为 {id} 的记忆",
        "problem.memory.missing_in_scope": "{agent!r}/{user!r} 下没有编号为 {id} 的记忆",
        "problem.memory.not_active": "记忆 {id} 当前为「{status}」，请先恢复",
        "problem.memory.superseded": "记忆 {id} 已被记忆 {by} 替换，请恢复或编辑那一条",
        "problem.conflict.missing": "记忆 {id} 不是被替换的记忆",
        "problem.conflict.side_not_active": "记忆 {id} 当前为「{status}」，请先恢复再选择",
        "problem.text.nul": "含有 NUL 字符（\\x00），请删除后再提交",
        "problem.text.surrogate": "不是有效的 Unicode 文本（第 {position} 个字符是孤立的代理项）",
        "problem.text.blank": "内容为空",
        "problem.zone.unknown": "{value!r} 不是时区：请填写 IANA 时区名（如 'Asia/Shanghai'）"
        "或 UTC 偏移（如 'UTC+8'、'UTC-03:30'）",
        "problem.language.unknown": "{value!r} 不是语言标签：请填写 BCP 47 标签，"
        "如 'zh-CN'、'en'、'pt-BR'",
        "problem.form.out_of_date": "{path}：表单已过期，请刷新页面",
        "problem.form.not_object": "{path}：应为对象",
        "error.with_detail": "{what}：{detail}",
        "invalid.field": "{field}：{mistake}",
        "invalid.and": "；",
        "invalid.comma": "、",
        "invalid.or": "或",
        "invalid.empty": "不能为空",
        "invalid.other": "值无效",
        "invalid.missing": "必填",
        "invalid.text": "应为文本",
        "invalid.text_too_short": "至少 {min_length} 个字符",
        "invalid.text_too_long": "最多 {max_length} 个字符",
        "invalid.pattern": "格式不符，应匹配 {pattern}",
        "invalid.whole_number": "应为整数",
        "invalid.number": "应为数字",
        "invalid.finite": "应为有限的数字",
        "invalid.yes_no": "应为是或否",
        "invalid.gt": "应大于 {gt}",
        "invalid.ge": "应不小于 {ge}",
        "invalid.lt": "应小于 {lt}",
        "invalid.le": "应不大于 {le}",
        "invalid.one_of": "应为以下之一：{expected}",
        "invalid.date": "应为日期，如 2026-03-01",
        "invalid.datetime": "应为日期和时间，如 2026-03-01T09:00:00Z",
        "invalid.too_few": "至少 {min_length} 项",
        "invalid.too_many": "最多 {max_length} 项",
        "invalid.list": "应为列表",
        "invalid.object": "应为对象",
        "invalid.unknown_field": "不是此处的字段",
    },
}
