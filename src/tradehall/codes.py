"""The error-code catalogue (ChainUp family). Shared by the engine (rejections) and the API."""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    UNKNOWN = -1000
    INTERNAL = -1001
    APIKEY_MISSING = -1002
    TOO_MANY_REQUESTS = -1003
    TOO_MANY_ORDERS = -1015
    SHUTTING_DOWN = -1016
    CONTENT_TYPE = -1017
    UNSUPPORTED = -1020
    TIMESTAMP_WINDOW = -1021
    BAD_SIGNATURE = -1022
    TS_MISSING = -1023
    SIGN_MISSING = -1024
    ILLEGAL_CHARS = -1100
    TOO_MANY_PARAMS = -1101
    BAD_PARAM = -1102
    UNKNOWN_PARAM = -1103
    PRECISION = -1111
    NO_OPEN_ORDER = -1112
    BAD_ORDER_TYPE = -1116
    BAD_SIDE = -1117
    BAD_SYMBOL = -1121
    BELOW_MINIMUM = -1136
    PRICE_RANGE = -1138
    MARKET_NOT_SUPPORTED = -1139
    CANNOT_CANCEL = -1145
    NO_SUCH_ORDER = -2013
    BAD_KEY = -2015
    TRADING_FROZEN = -2016
    INSUFFICIENT_BALANCE = -2017


class Reject(Exception):
    """A command or request refused before it changed anything."""

    def __init__(self, code: Code, msg: str) -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
