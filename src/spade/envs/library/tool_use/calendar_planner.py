"""Calendar assistant whose steps branch on what the calendar already holds (read-then-write variant).

The agent reads a day's events, then moves or creates a meeting depending on what it found, books a
2-hour block in the earliest free slot, sets a reminder on it and clears a recurring event.
"""

from spade.envs.tool_base import ToolUseBaseEnv

import json

DATES = ["2025-03-10", "2025-03-11", "2025-03-12", "2025-03-13", "2025-03-14"]
TITLES = ["Budget review", "Design sync", "Client call", "1:1 with Sam", "Hiring panel", "Vendor demo",
          "Roadmap planning", "Team lunch", "Security briefing", "Quarterly check-in"]
FILLERS = ["Standup", "Focus time", "Inbox zero", "Office hours"]


class CalendarPlanner(ToolUseBaseEnv):
    _tools = {
        "list_events": {
            "description": "List the events on one date (id, title, start hour, duration in hours).",
            "parameters": {"date": {"type": "string", "description": "Date as YYYY-MM-DD.", "enum": DATES}},
            "required": ["date"],
        },
        "create_event": {
            "description": "Create an event. Working hours are 9-17; events may not overlap.",
            "parameters": {
                "title": {"type": "string", "description": "Event title."},
                "date": {"type": "string", "description": "Date as YYYY-MM-DD.", "enum": DATES},
                "start_hour": {"type": "integer", "description": "Start hour, 9-16."},
                "duration_hours": {"type": "integer", "description": "Length in whole hours."},
            },
            "required": ["title", "date", "start_hour", "duration_hours"],
        },
        "move_event": {
            "description": "Move an existing event to another date and start hour (same duration).",
            "parameters": {
                "event_id": {"type": "string", "description": "Event id."},
                "date": {"type": "string", "description": "New date.", "enum": DATES},
                "start_hour": {"type": "integer", "description": "New start hour."},
            },
            "required": ["event_id", "date", "start_hour"],
        },
        "delete_event": {
            "description": "Delete an event.",
            "parameters": {"event_id": {"type": "string", "description": "Event id."}},
            "required": ["event_id"],
        },
        "set_reminder": {
            "description": "Set a reminder before an event.",
            "parameters": {
                "event_id": {"type": "string", "description": "Event id."},
                "minutes_before": {"type": "integer", "description": "Minutes before the start.", "enum": [5, 10, 15, 30, 60]},
            },
            "required": ["event_id", "minutes_before"],
        },
        "get_weather": {
            "description": "Weather forecast for a city.",
            "parameters": {"city": {"type": "string", "description": "City name."}},
            "required": ["city"],
        },
        "convert_timezone": {
            "description": "Convert an hour between two time zones.",
            "parameters": {
                "hour": {"type": "integer", "description": "Hour of day."},
                "from_zone": {"type": "string", "description": "Source zone."},
                "to_zone": {"type": "string", "description": "Target zone."},
            },
            "required": ["hour", "from_zone", "to_zone"],
        },
    }

    def _new_id(self):
        self.state["next_id"] += 1
        return f"EV-{self.state['next_id']}"

    def _add(self, title, date, start, duration):
        event_id = self._new_id()
        self.state["events"][event_id] = {"title": title, "date": date, "start": start, "duration": duration, "reminder": None}
        return event_id

    def _clash(self, date, start, duration, ignore=None):
        if start < 9 or start + duration > 17 or duration < 1:
            return "outside working hours 9-17"
        for event_id, e in self.state["events"].items():
            if event_id != ignore and e["date"] == date and start < e["start"] + e["duration"] and e["start"] < start + duration:
                return f"overlaps {event_id} ({e['title']})"
        return ""

    def _setup(self, rng):
        self.state = {"events": {}, "next_id": rng.randint(100, 800)}
        titles = rng.sample(TITLES, 3)
        meeting, block, chore = titles
        day_a, day_b, day_c, day_d = rng.sample(DATES, 4)
        for date in DATES:
            for hour in sorted(rng.sample(range(9, 17), 3)):
                if not self._clash(date, hour, 1):
                    self._add(rng.choice(FILLERS), date, hour, 1)
        hour_a = rng.choice([h for h in range(9, 16) if not self._clash(day_a, h, 1)])
        self._meeting_exists = rng.random() < 0.5
        if self._meeting_exists:
            self._add(meeting, day_a, hour_a, 1)
        hour_b = rng.choice([h for h in range(9, 16) if not self._clash(day_b, h, 1)])
        for hour in sorted(rng.sample(range(9, 17), 2)):
            if not self._clash(day_d, hour, 1):
                self._add(chore, day_d, hour, 1)
        if not any(e["title"] == chore for e in self.state["events"].values()):
            slot = [h for h in range(9, 17) if not self._clash(day_d, h, 1)][0]
            self._add(chore, day_d, slot, 1)
        free_c = [h for h in range(9, 16) if not self._clash(day_c, h, 2)]
        if not free_c:
            for event_id in [i for i, e in self.state["events"].items() if e["date"] == day_c and e["title"] in FILLERS][:2]:
                del self.state["events"][event_id]
            free_c = [h for h in range(9, 16) if not self._clash(day_c, h, 2)]
        self._earliest = free_c[0]
        self._initial_other = sorted(i for i, e in self.state["events"].items() if not (e["title"] == chore and e["date"] == day_d))
        self._plan = {"meeting": meeting, "block": block, "chore": chore, "a": day_a, "b": day_b, "c": day_c,
                      "d": day_d, "hour_a": hour_a, "hour_b": hour_b, "minutes": rng.choice([10, 15, 30])}
        p = self._plan
        self._user_messages = [
            f"Look at my calendar for {day_a}. If there is a '{meeting}' at {hour_a}:00 that day, move it to {day_b} "
            f"at {hour_b}:00. If there is none, create a 1-hour '{meeting}' on {day_b} at {hour_b}:00 instead.",
            f"Book a 2-hour '{block}' on {day_c} in the earliest free slot (working hours are 9:00-17:00).",
            f"Put a {p['minutes']}-minute reminder on that '{block}'.",
            f"Remove every '{chore}' event on {day_d}, but leave everything else as it is.",
        ]

        def moved(s):
            events = s["events"].values()
            at_b = any(e["title"] == meeting and e["date"] == day_b and e["start"] == hour_b for e in events)
            left_a = any(e["title"] == meeting and e["date"] == day_a for e in events)
            return at_b and not left_a

        def booked(s):
            return any(e["title"] == block and e["date"] == day_c and e["start"] == self._earliest and e["duration"] == 2
                       for e in s["events"].values())

        def reminded(s):
            return any(e["title"] == block and e["date"] == day_c and e["reminder"] == p["minutes"] for e in s["events"].values())

        def cleared(s):
            gone = not any(e["title"] == chore and e["date"] == day_d for e in s["events"].values())
            return gone and all(i in s["events"] for i in self._initial_other)

        self._message_criteria = [moved, booked, reminded, cleared]

    def _event(self, event_id):
        if event_id not in self.state["events"]:
            raise KeyError(f"no event with id {event_id!r}")
        return self.state["events"][event_id]

    def tool_list_events(self, date):
        found = [dict(event_id=i, title=e["title"], start_hour=e["start"], duration_hours=e["duration"])
                 for i, e in self.state["events"].items() if e["date"] == date]
        return sorted(found, key=lambda e: e["start_hour"])

    def tool_create_event(self, title, date, start_hour, duration_hours):
        problem = self._clash(date, start_hour, duration_hours)
        if problem:
            raise ValueError(f"cannot create event: {problem}")
        return {"event_id": self._add(title.strip(), date, start_hour, duration_hours)}

    def tool_move_event(self, event_id, date, start_hour):
        event = self._event(event_id)
        problem = self._clash(date, start_hour, event["duration"], ignore=event_id)
        if problem:
            raise ValueError(f"cannot move event: {problem}")
        event["date"], event["start"] = date, start_hour
        return {"event_id": event_id, "date": date, "start_hour": start_hour}

    def tool_delete_event(self, event_id):
        self._event(event_id)
        del self.state["events"][event_id]
        return {"deleted": event_id}

    def tool_set_reminder(self, event_id, minutes_before):
        self._event(event_id)["reminder"] = minutes_before
        return {"event_id": event_id, "reminder_minutes": minutes_before}

    def tool_get_weather(self, city):
        return {"city": city, "forecast": "cloudy", "high_c": 14}

    def tool_convert_timezone(self, hour, from_zone, to_zone):
        raise ValueError(f"unknown time zone pair {from_zone!r} -> {to_zone!r}")

    def solution(self):
        p = self._plan
        calls = []
        next_id = self.state["next_id"]
        if self._current_msg <= 0:
            calls.append({"name": "list_events", "arguments": {"date": p["a"]}})
            existing = [i for i, e in self.state["events"].items() if e["title"] == p["meeting"] and e["date"] == p["a"]]
            if existing:
                calls.append({"name": "move_event", "arguments": {"event_id": existing[0], "date": p["b"], "start_hour": p["hour_b"]}})
            else:
                calls.append({"name": "create_event", "arguments": {"title": p["meeting"], "date": p["b"], "start_hour": p["hour_b"], "duration_hours": 1}})
                next_id += 1
        if self._current_msg <= 1:
            calls.append({"name": "list_events", "arguments": {"date": p["c"]}})
            calls.append({"name": "create_event", "arguments": {"title": p["block"], "date": p["c"], "start_hour": self._earliest, "duration_hours": 2}})
            next_id += 1
            block_id = f"EV-{next_id}"
        else:
            block_id = next(i for i, e in self.state["events"].items() if e["title"] == p["block"] and e["date"] == p["c"])
        if self._current_msg <= 2:
            calls.append({"name": "set_reminder", "arguments": {"event_id": block_id, "minutes_before": p["minutes"]}})
        calls.append({"name": "list_events", "arguments": {"date": p["d"]}})
        for event_id, e in self.state["events"].items():
            if e["title"] == p["chore"] and e["date"] == p["d"]:
                calls.append({"name": "delete_event", "arguments": {"event_id": event_id}})
        return "\n".join([json.dumps(c) for c in calls] + ["<answer>done</answer>"])
