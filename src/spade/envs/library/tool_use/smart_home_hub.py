"""Smart-home control with one request no tool can serve (with-irrelevant variant).

Device ids are only visible through ``list_devices``; one of the user's requests (ordering food,
booking a plumber, ...) must be declined with ``decline_request`` rather than forced onto a tool.
"""

from spade.envs.tool_base import DECLINE_TOOL, ToolUseBaseEnv

import json

ROOMS = ["kitchen", "living_room", "bedroom", "hallway", "office"]
OUT_OF_SCOPE = [
    "Order a large pepperoni pizza to the house for tonight.",
    "Book a plumber to fix the dripping tap tomorrow morning.",
    "Send a text message to my sister saying I'll be late.",
    "Renew my car insurance before it expires this week.",
]


class SmartHomeHub(ToolUseBaseEnv):
    _tools = {
        "list_devices": {
            "description": "List the devices in one room with their ids, kinds and current settings.",
            "parameters": {"room": {"type": "string", "description": "Room name.", "enum": ROOMS}},
            "required": ["room"],
        },
        "set_light": {
            "description": "Switch a light on at a brightness (1-100) or off (0).",
            "parameters": {
                "device_id": {"type": "string", "description": "Light id."},
                "brightness": {"type": "integer", "description": "0 = off, 1-100 = on at that brightness."},
                "colour": {"type": "string", "description": "Colour temperature.", "enum": ["warm", "neutral", "cool"]},
            },
            "required": ["device_id", "brightness"],
        },
        "set_thermostat": {
            "description": "Set a thermostat's mode and target temperature in Celsius.",
            "parameters": {
                "device_id": {"type": "string", "description": "Thermostat id."},
                "mode": {"type": "string", "description": "Operating mode.", "enum": ["heat", "cool", "auto", "off"]},
                "target_celsius": {"type": "integer", "description": "Target temperature, 10-30."},
            },
            "required": ["device_id", "mode", "target_celsius"],
        },
        "set_lock": {
            "description": "Lock or unlock a door lock.",
            "parameters": {
                "device_id": {"type": "string", "description": "Lock id."},
                "locked": {"type": "boolean", "description": "true to lock, false to unlock."},
            },
            "required": ["device_id", "locked"],
        },
        "decline_request": DECLINE_TOOL,
        "get_energy_report": {
            "description": "Household energy use over a period.",
            "parameters": {"period": {"type": "string", "description": "Report period.", "enum": ["day", "week", "month"]}},
            "required": ["period"],
        },
        "list_scenes": {
            "description": "List saved lighting scenes.",
            "parameters": {},
            "required": [],
        },
    }

    def _setup(self, rng):
        devices = {}
        used = set()

        def new_id(prefix):
            while True:
                candidate = f"{prefix}-{rng.randint(100, 999)}"
                if candidate not in used:
                    used.add(candidate)
                    return candidate

        for room in ROOMS:
            devices[new_id("lt")] = {"room": room, "kind": "light", "brightness": 0, "colour": "warm"}
            if room in ("living_room", "bedroom", "office"):
                devices[new_id("th")] = {"room": room, "kind": "thermostat", "mode": "off", "target_celsius": 18}
            if room in ("hallway", "kitchen"):
                devices[new_id("lk")] = {"room": room, "kind": "lock", "locked": False}
        self.state = {"devices": devices, "declined_at": []}

        def find(room, kind):
            return next(i for i, d in devices.items() if d["room"] == room and d["kind"] == kind)

        light_room = rng.choice(ROOMS)
        light_id, brightness = find(light_room, "light"), rng.choice([20, 35, 50, 65, 80])
        colour = rng.choice(["warm", "neutral", "cool"])
        heat_room = rng.choice(["living_room", "bedroom", "office"])
        heat_id, mode, target = find(heat_room, "thermostat"), rng.choice(["heat", "cool"]), rng.randint(17, 24)
        door_room = rng.choice(["hallway", "kitchen"])
        door_id = find(door_room, "lock")
        pretty = {r: r.replace("_", " ") for r in ROOMS}
        jobs = [
            ("light", f"Turn the {pretty[light_room]} light on at {brightness}% brightness with a {colour} colour.",
             {"name": "set_light", "arguments": {"device_id": light_id, "brightness": brightness, "colour": colour}},
             lambda s: s["devices"][light_id]["brightness"] == brightness and s["devices"][light_id]["colour"] == colour),
            ("heat", f"Set the {pretty[heat_room]} thermostat to {mode} mode with a target of {target} degrees Celsius.",
             {"name": "set_thermostat", "arguments": {"device_id": heat_id, "mode": mode, "target_celsius": target}},
             lambda s: s["devices"][heat_id]["mode"] == mode and s["devices"][heat_id]["target_celsius"] == target),
            ("lock", f"Lock the {pretty[door_room]} door.",
             {"name": "set_lock", "arguments": {"device_id": door_id, "locked": True}},
             lambda s: s["devices"][door_id]["locked"] is True),
        ]
        rng.shuffle(jobs)
        slot = rng.randrange(1, len(jobs) + 1)
        refusal = rng.choice(OUT_OF_SCOPE)
        jobs.insert(slot, ("decline", refusal,
                           {"name": "decline_request", "arguments": {"reason": "No available tool can do this."}},
                           lambda s, k=slot: k in s["declined_at"]))
        self._jobs = jobs
        self._rooms = {"light": light_room, "heat": heat_room, "lock": door_room}
        self._user_messages = [text for _, text, _, _ in jobs]
        self._message_criteria = [check for _, _, _, check in jobs]

    def _device(self, device_id, kind):
        device = self.state["devices"].get(device_id)
        if device is None:
            raise KeyError(f"no device with id {device_id!r}")
        if device["kind"] != kind:
            raise ValueError(f"device {device_id} is a {device['kind']}, not a {kind}")
        return device

    def tool_list_devices(self, room):
        return [dict(device_id=i, **d) for i, d in self.state["devices"].items() if d["room"] == room]

    def tool_set_light(self, device_id, brightness, colour=None):
        device = self._device(device_id, "light")
        if not 0 <= brightness <= 100:
            raise ValueError("brightness must be between 0 and 100")
        device["brightness"] = brightness
        if colour is not None:
            device["colour"] = colour
        return {"device_id": device_id, "brightness": brightness, "colour": device["colour"]}

    def tool_set_thermostat(self, device_id, mode, target_celsius):
        device = self._device(device_id, "thermostat")
        if not 10 <= target_celsius <= 30:
            raise ValueError("target_celsius must be between 10 and 30")
        device["mode"], device["target_celsius"] = mode, target_celsius
        return {"device_id": device_id, "mode": mode, "target_celsius": target_celsius}

    def tool_set_lock(self, device_id, locked):
        self._device(device_id, "lock")["locked"] = locked
        return {"device_id": device_id, "locked": locked}

    def tool_decline_request(self, reason):
        self.state["declined_at"].append(self._current_msg)
        return "Request declined: " + str(reason)

    def tool_get_energy_report(self, period):
        return {"period": period, "kwh": {"day": 11.2, "week": 74.5, "month": 310.0}[period]}

    def tool_list_scenes(self):
        return ["movie night", "morning"]

    def solution(self):
        calls = []
        for kind, _, call, _ in self._jobs[self._current_msg:]:
            if kind != "decline":
                calls.append({"name": "list_devices", "arguments": {"room": self._rooms[kind]}})
            calls.append(call)
        return "\n".join([json.dumps(c) for c in calls] + ["<answer>done</answer>"])
