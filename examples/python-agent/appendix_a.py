from platform_sdk import PlatformClient, Tool

# 初始化客户端（Agent 侧使用）
client = PlatformClient(
    base_url="http://orchestrator:8080",
    run_id="run_001"  # 从请求 header 获取
)

# 调用 LLM（OpenAI 兼容）
response = client.chat.completions.create(
    model="gpt-4",
    messages=[{"role": "user", "content": "Hello"}],
    stream=True
)

for chunk in response:
    print(chunk.choices[0].delta.content, end="")

# 调用 Tool（同步封装，内部处理 pending/wait）
result = client.tools.invoke(
    tool_name="weather.query",
    args={"city": "北京"}
)
print(result)  # {"weather": "晴", "temperature": 25}

# 调用其他 Agent
child_response = client.agents.invoke(
    agent_id="weather_agent",
    message={"role": "user", "content": "查询北京天气"}
)
