"""The profile form's words, in English and Chinese: a label for every field of the two
profile documents and of the records in them (by the field's key: `notes` reads the same
in a person and in a project), and a word for every value a field chooses from.
i18n.MESSAGES takes them in as "profile_field.<key>" and "profile_option.<key>.<value>";
a test walks the models and fails on a field or a value left without one."""

from __future__ import annotations

# key: (English, Chinese)
FIELDS: dict[str, tuple[str, str]] = {
    # the user profile
    "occupation": ("Occupation", "职业"),
    "timezone": ("Time zone", "时区"),
    "primary_language": ("Primary language", "主要语言"),
    "people": ("People", "相关人物"),
    "places": ("Places", "常去地点"),
    "preferences": ("Preferences", "偏好"),
    "scheduling_preferences": ("Scheduling preferences", "日程偏好"),
    "interests": ("Interests", "兴趣"),
    "avoid_topics": ("Topics to avoid", "回避的话题"),
    "custom_rules": ("Custom rules", "自定义规则"),
    "recurring_routines": ("Recurring routines", "例行活动"),
    # people, places, routines
    "name": ("Name", "名称"),
    "relationship": ("Relationship", "关系"),
    "role": ("Role", "角色"),
    "preferred_contact_channel": ("Preferred contact channel", "偏好的联系方式"),
    "notes": ("Notes", "备注"),
    "category": ("Category", "类别"),
    "address": ("Address", "地址"),
    "commute_minutes": ("Commute (minutes)", "通勤时间（分钟）"),
    "preference": ("Preference", "喜好"),
    "description": ("Description", "描述"),
    "cadence": ("Cadence", "频率"),
    "time_windows": ("Time windows", "时段"),
    "importance": ("Importance", "重要程度"),
    # preferences
    "communication_style": ("Communication style", "沟通风格"),
    "language_preference": ("Preferred languages", "偏好的语言"),
    "location_preference": ("Location preference", "地点偏好"),
    "work_lifestyle": ("Work and lifestyle", "工作与生活方式"),
    "notification_preference": ("Notification preferences", "通知偏好"),
    # scheduling and work habits
    "productive_windows": ("Productive hours", "高效时段"),
    "preferred_meeting_windows": ("Preferred meeting windows", "偏好的会议时段"),
    "no_meeting_windows": ("No-meeting windows", "不开会的时段"),
    "deep_work_windows": ("Deep-work windows", "专注工作时段"),
    "preferred_meeting_duration_minutes": (
        "Preferred meeting lengths (minutes)",
        "偏好的会议时长（分钟）",
    ),
    "meeting_buffer_minutes": ("Break between meetings (minutes)", "会议间隔（分钟）"),
    "max_meetings_per_day": ("Most meetings a day", "每天最多会议数"),
    "available_hours": ("Available hours", "可工作时间"),
    "deep_work_blocks": ("Deep-work blocks", "专注工作时间块"),
    "notification_channel": ("Notification channel", "通知渠道"),
    # a time window
    "weekdays": ("Weekdays", "星期"),
    "start": ("Start", "开始"),
    "end": ("End", "结束"),
    # the work profile
    "expertise": ("Expertise", "专长"),
    "preferred_tools": ("Preferred tools", "常用工具"),
    "current_projects": ("Current projects", "当前项目"),
    "work_habits": ("Work habits", "工作习惯"),
    "team_members": ("Team members", "团队成员"),
    "team_context": ("Team context", "团队背景"),
    "work_rules": ("Work rules", "工作规则"),
    # projects and milestones
    "status": ("Status", "状态"),
    "priority": ("Priority", "优先级"),
    "deadline": ("Deadline", "截止日期"),
    "collaborators": ("Collaborators", "合作者"),
    "key_milestones": ("Key milestones", "关键里程碑"),
    "due_date": ("Due date", "到期日"),
    # where a value came from (read-only)
    "meta": ("Origin", "来源信息"),
    "source": ("Source", "来源"),
    "confidence": ("Confidence", "置信度"),
    "last_updated_at": ("Last updated", "最后更新"),
}

# (key, value): (English, Chinese)
OPTIONS: dict[tuple[str, str], tuple[str, str]] = {
    ("preference", "like"): ("Like", "喜欢"),
    ("preference", "neutral"): ("Neutral", "一般"),
    ("preference", "avoid"): ("Avoid", "避开"),
    ("status", "planned"): ("Planned", "计划中"),
    ("status", "active"): ("Active", "进行中"),
    ("status", "paused"): ("Paused", "已暂停"),
    ("status", "completed"): ("Completed", "已完成"),
    ("weekdays", "mon"): ("Mon", "周一"),
    ("weekdays", "tue"): ("Tue", "周二"),
    ("weekdays", "wed"): ("Wed", "周三"),
    ("weekdays", "thu"): ("Thu", "周四"),
    ("weekdays", "fri"): ("Fri", "周五"),
    ("weekdays", "sat"): ("Sat", "周六"),
    ("weekdays", "sun"): ("Sun", "周日"),
}

PROFILE_WORDS: dict[str, dict[str, str]] = {
    lang: {f"profile_field.{key}": words[i] for key, words in FIELDS.items()}
    | {f"profile_option.{key}.{value}": words[i] for (key, value), words in OPTIONS.items()}
    for i, lang in enumerate(("en", "zh"))
}
